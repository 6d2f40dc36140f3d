"""Neighbouring turns (SEARCH_NEIGHBOUR_WEIGHT, docs/retrieval.md "Neighbouring turns"), on the real stack (Redis,
Neo4j, Qdrant Edge, ARQ worker; hash embedder, offline extractor): a conversation write's memories know where they
sit in it, and a search brings the messages next to its best hit, which may answer it without a word of the
question."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from service.deps import Deps
from service.schemas.search import SearchRequest
from service.search.fusion import fuse
from service.search.neighbours import neighbours
from service.search.retriever import Query
from service.search.searcher import Searcher
from service.stores.vector import MemoryFilter, RankRequest
from tests.conftest import unique
from tests.integration.conftest import running_app, searcher_of, wait_task, write_raw

# In windows of two messages: [0, 1], [2, 3], [4, 5], [6, 7], [8, 9]. The question matches [2, 3]; its answer is in
# the next window, which shares no word with the question.
CONVERSATION = [
    {"role": "user", "content": "We watched a film about sailing ships tonight"},
    {"role": "assistant", "content": "Sounds relaxing."},
    {"role": "user", "content": "Where should we book the birthday dinner for my sister?"},
    {"role": "assistant", "content": "Which food does she enjoy most?"},
    {"role": "user", "content": "Fresh oysters, grilled lobster, anything from the harbour."},
    {"role": "assistant", "content": "Then try The Blue Anchor on Quay Street."},
    {"role": "user", "content": "My bicycle tyre went flat again on the commute."},
    {"role": "assistant", "content": "A new inner tube should fix it."},
    {"role": "user", "content": "The garden needs watering twice a week in July."},
    {"role": "assistant", "content": "Early mornings are best for that."},
]
QUESTION = "Where is my sister's birthday dinner booked?"


async def converse(client: httpx.AsyncClient, user: str) -> list[dict[str, Any]]:
    resp = await client.post("/v1/memories", json={"messages": CONVERSATION, "user_id": user})
    assert resp.status_code == 202, resp.text
    done = await wait_task(client, resp.json()["task_id"])
    assert done["status"] == "completed", done
    memories: list[dict[str, Any]] = done["result"]["memories"]
    return memories


def window(memories: list[dict[str, Any]], first: int) -> str:
    return str(next(m["id"] for m in memories
                    if m["category"] == "interaction" and m["source_message_ids"] == [str(first), str(first + 1)]))


async def search_ids(client: httpx.AsyncClient, user: str, limit: int) -> list[str]:
    resp = await client.post("/v1/search", json={"query": QUESTION, "user_id": user, "limit": limit})
    assert resp.status_code == 200, resp.text
    assert resp.json()["degraded"] == []
    return [r["id"] for r in resp.json()["results"]]


async def test_a_conversation_write_records_where_each_memory_sits(client: httpx.AsyncClient, deps: Deps) -> None:
    user = unique("positions")
    memories = await converse(client, user)
    stored = {m.id: m for m in await deps.vectors.get([m["id"] for m in memories])}
    task = {m.task_id for m in stored.values()}
    assert len(task) == 1 and None not in task
    for m in stored.values():
        positions = sorted(int(s) for s in m.source_message_ids)
        assert (m.source_write, m.source_first, m.source_last) == (m.task_id, positions[0], positions[-1])
    assert (stored[window(memories, 4)].source_first, stored[window(memories, 4)].source_last) == (4, 5)
    # a raw write carries no order unless it names its thread and position: no neighbours
    raw = (await write_raw(client, user_id=user, category="interaction", content="A raw note"))["result"]["memories"]
    [note] = await deps.vectors.get([raw[0]["id"]])
    assert (note.source_write, note.source_first, note.source_last) == (None, None, None)


# A transcript written message by message (raw writes with thread_id and position): the question matches message
# 4, its answer is message 5, which shares no word with the question.
TRANSCRIPT = [
    "We watched a film about sailing ships tonight",
    "My bicycle tyre went flat again on the commute.",
    "The garden needs watering twice a week in July.",
    "Our landlord finally repaired the kitchen tap.",
    "Where should we book the birthday dinner for my sister?",
    "Try The Blue Anchor on Quay Street, she adores oysters.",
    "The new printer jams on thick paper.",
    "I started learning the cello in September.",
    "Our flight to Lisbon leaves at six in the morning.",
    "The neighbour's cat sleeps on our porch every afternoon.",
]


async def write_transcript(client: httpx.AsyncClient, user: str, thread: str) -> list[str]:
    """The transcript as one raw batch, each message with its thread and position; the memory ids in order."""
    items = [{"content": text, "category": "interaction", "thread_id": thread, "position": i}
             for i, text in enumerate(TRANSCRIPT)]
    resp = await client.post("/v1/memories/raw/batch", json={"user_id": user, "memories": items})
    assert resp.status_code == 202, resp.text
    done = await wait_task(client, resp.json()["task_id"])
    assert done["status"] == "completed", done
    by_text = {m["content"]: m["id"] for m in done["result"]["memories"]}
    return [by_text[text] for text in TRANSCRIPT]


async def test_raw_messages_of_a_thread_have_neighbours(client: httpx.AsyncClient, deps: Deps) -> None:
    """A raw write that names its thread and position is that message of the thread: its neighbours are the
    thread's messages at the next positions, in that thread only; thread_id without position is refused."""
    user = unique("thread")
    ids = await write_transcript(client, user, "dinner-chat")
    other = await write_transcript(client, user, "another-chat")  # the same words in another thread
    stored = {m.id: m for m in await deps.vectors.get(ids)}
    assert [(stored[i].source_write, stored[i].source_first, stored[i].source_last) for i in ids] == [
        ("thread:dinner-chat", n, n) for n in range(len(TRANSCRIPT))]
    embed = searcher_of(deps).query_vector
    q = Query(QUESTION, user, None, MemoryFilter(user_id=user), 10, embed, asyncio.ensure_future(embed(QUESTION)))
    found = dict(await neighbours(deps.vectors, fuse({"lexical": [(ids[4], 1.0)]}, {"lexical": 1.0}, 5.0), q))
    assert set(found) == {ids[3], ids[5]}
    assert not set(found) & set(other)

    for bad in ({"thread_id": "dinner-chat"}, {"position": 3}, {"thread_id": "dinner-chat", "position": -1}):
        resp = await client.post("/v1/memories/raw", json={"user_id": user, "category": "interaction",
                                                            "content": "An unplaced message", **bad})
        assert resp.status_code == 422, resp.text
    resp = await client.post("/v1/memories/raw", json={"user_id": user, "category": "interaction",
                                                        "content": "An unplaced message", "thread_id": "x"})
    assert "thread_id and position go together" in resp.text


async def test_neighbours_bring_the_answer_next_to_the_best_hit(client: httpx.AsyncClient, deps: Deps) -> None:
    """The module alone: the neighbours of the question's best hit ([2, 3]) are the windows before and after it
    (and the facts of their messages), never the hit itself nor a window two steps away."""
    user = unique("neighbours")
    memories = await converse(client, user)
    hit, answer, before, far = window(memories, 2), window(memories, 4), window(memories, 0), window(memories, 8)
    embed = searcher_of(deps).query_vector
    q = Query(QUESTION, user, None, MemoryFilter(user_id=user), 10, embed, asyncio.ensure_future(embed(QUESTION)))
    [plain] = await deps.vectors.rank([RankRequest(q.flt, 10, text=q.text)])
    assert [mid for mid, _ in plain][:1] == [hit] and answer not in dict(plain)  # no word of the question

    found = dict(await neighbours(deps.vectors, fuse({"lexical": plain[:1]}, {"lexical": 1.0}, 5.0), q))
    assert answer in found and before in found
    assert hit not in found and far not in found and window(memories, 6) not in found
    spans = {m.id: (m.source_first, m.source_last) for m in await deps.vectors.get(list(found))}
    assert all(first is not None and last is not None and first <= 4 and last >= 1 and (first < 2 or last > 3)
               for first, last in spans.values())
    assert await neighbours(deps.vectors, [], q) == []


async def test_search_with_neighbours_returns_the_answer_beside_the_question(tmp_path: Path) -> None:
    """Through the API with SEARCH_NEIGHBOUR_WEIGHT on, the answer comes second, after the message it answers; the
    same search without neighbours (same stores, weight 0) does not return it among the first three."""
    user = unique("neighbours-api")
    async with running_app(tmp_path, search_neighbour_weight=1.0, graph_timeout_seconds=60.0) as (client, deps):
        memories = await converse(client, user)
        hit, answer = window(memories, 2), window(memories, 4)
        assert searcher_of(deps).settings.neighbour_weight == 1.0
        near = await search_ids(client, user, 2)
        off = deps.settings.search.model_copy(update={"neighbour_weight": 0.0})
        served = Searcher(off, deps.vectors, deps.graph, deps.query_embedder, graph_timeout_s=60.0,
                          graph_entity_weight=deps.settings.calibration.graph_entity)
        plain = await served.search(SearchRequest(query=QUESTION, limit=3), user)
    # the next messages' window or a fact drawn from them (collapse folds the one into the other)
    answers = {m["id"] for m in memories if set(m["source_message_ids"]) <= {"4", "5"}}
    assert answer in answers and len(near) == 2 and near[0] == hit and near[1] in answers
    assert plain.results[0].id == hit and not answers & {r.id for r in plain.results}
