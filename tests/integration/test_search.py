"""Hybrid search through the API (real Redis, Neo4j, Qdrant Edge, ARQ worker; hash embedder): each
retriever finds what only it can, `signals` say which did, and time narrows or ranks."""

from __future__ import annotations

import gc
import re
from pathlib import Path
from typing import Any

import httpx

from service.core.domain import ID_PATTERN
from tests.conftest import unique
from tests.integration.conftest import write_raw


async def search(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    resp = await client.post("/v1/search", json=body)
    assert resp.status_code == 200, resp.text
    answer: dict[str, Any] = resp.json()
    assert answer["degraded"] == []
    return answer


def signals(result: dict[str, Any]) -> dict[str, int]:
    return {s["retriever"]: s["rank"] for s in result["signals"]}


async def stored(client: httpx.AsyncClient, **body: Any) -> str:
    done = await write_raw(client, **body)
    return str(done["result"]["memories"][0]["id"])


async def test_lexical_match_on_a_rare_token(client: httpx.AsyncClient) -> None:
    user = unique("lex")
    for i in range(8):
        await stored(client, user_id=user, category="interaction", content=f"we had lunch and talked on day {i}")
    ticket = await stored(client, user_id=user, category="interaction", content="the outage ticket is ZX-4411")
    answer = await search(client, user_id=user, query="ZX-4411", limit=3)
    top = answer["results"][0]
    assert top["id"] == ticket
    assert signals(top)["lexical"] == 1
    assert top["score"] > 0 and top["source"] == "vector"
    only = await search(client, user_id=user, query="ZX-4411", retrievers=["lexical"], limit=5)
    assert [r["id"] for r in only["results"]] == [ticket]
    assert {s["retriever"] for r in only["results"] for s in r["signals"]} == {"lexical"}


async def test_lexical_finds_a_memory_that_names_the_slot_in_other_words(client: httpx.AsyncClient) -> None:
    """"Which CI do we use" finds "every pipeline runs on GitHub Actions now" by its words (service/text/slots.py);
    a query that names no slot of a group finds nothing through them."""
    user = unique("slot")
    for i in range(6):
        await stored(client, user_id=user, category="interaction", content=f"we talked about lunch on day {i}")
    moved = await stored(client, user_id=user, category="interaction",
                         content="big news: every pipeline runs on GitHub Actions now")
    only = await search(client, user_id=user, query="Which CI system does my team use?", retrievers=["lexical"],
                        limit=5)
    assert [r["id"] for r in only["results"]] == [moved]
    none = await search(client, user_id=user, query="Which editor do I use?", retrievers=["lexical"], limit=5)
    assert none["results"] == []


async def test_graph_only_match_through_one_relation(client: httpx.AsyncClient) -> None:
    """"Acme" names an entity; "I live in Oslo" shares no word with it but mentions the user, whom a
    RELATES edge (user works_at Acme) links to Acme: only the graph retriever can return it."""
    user = unique("graph")
    work = await stored(client, user_id=user, category="personal_fact", content="I work at Acme.")
    home = await stored(client, user_id=user, category="personal_fact", content="I live in Oslo")
    graph = await search(client, user_id=user, query="Acme", retrievers=["graph"], limit=5)
    ranked = [r["id"] for r in graph["results"]]
    assert ranked[:1] == [work] and home in ranked  # the entity's own memory first, then one hop
    lexical = await search(client, user_id=user, query="Acme", retrievers=["lexical"], limit=5)
    assert home not in [r["id"] for r in lexical["results"]]
    fused = await search(client, user_id=user, query="Acme", limit=5)
    by_id = {r["id"]: r for r in fused["results"]}
    assert "graph" in signals(by_id[home]) and "lexical" not in signals(by_id[home])
    assert {"graph", "lexical", "dense"} <= set(signals(by_id[work]))


async def test_graph_ranks_an_entitys_memories_by_the_rest_of_the_query(client: httpx.AsyncClient) -> None:
    """A transcript line is by its speaker (an entity it mentions). The graph retriever proposes the memories of
    the entity the query names and ranks them by the query without that name: the one about the asked topic comes
    first among the speaker's many lines, and another speaker's line on the same topic is not proposed at all,
    while dense and lexical still rank over every memory."""
    user = unique("speaker")
    lines = ["the train was late again this morning", "my sister visited last week", "we watched a film on friday",
             "work has been busy with the new project", "I finally fixed the bike", "the garden needs rain"]
    for text in lines:
        await stored(client, user_id=user, category="interaction", content=f"Marta: {text}")
    pottery = await stored(client, user_id=user, category="interaction",
                           content="Marta: I made a clay bowl at my pottery class")
    other = await stored(client, user_id=user, category="interaction",
                         content="Tom: I made a clay bowl at my pottery class too")
    query = "What did Marta make at pottery class?"
    graph = await search(client, user_id=user, query=query, retrievers=["graph"], limit=10)
    ranked = [r["id"] for r in graph["results"]]
    assert ranked[0] == pottery and other not in ranked and len(ranked) == len(lines) + 1
    assert signals(graph["results"][0]) == {"graph": 1}
    for retriever in ("dense", "lexical"):
        only = await search(client, user_id=user, query=query, retrievers=[retriever], limit=10)
        assert other in [r["id"] for r in only["results"]][:2], retriever
    fused = await search(client, user_id=user, query=query, limit=3)
    assert fused["results"][0]["id"] == pottery and signals(fused["results"][0])["graph"] == 1


async def test_after_and_before_filter_on_occurred_at(client: httpx.AsyncClient) -> None:
    user = unique("window")
    times = {"jan": "2023-01-10T09:00:00Z", "may": "2023-05-10T09:00:00Z", "feb": "2024-02-01T09:00:00Z"}
    ids = {k: await stored(client, user_id=user, category="interaction", content=f"went hiking with Sam ({k})",
                           occurred_at=t) for k, t in times.items()}
    answer = await search(client, user_id=user, query="hiking", after="2023-03-01T00:00:00Z",
                          before="2024-01-01T00:00:00Z")
    assert [r["id"] for r in answer["results"]] == [ids["may"]]
    assert answer["results"][0]["occurred_at"].startswith("2023-05-10T09:00:00")
    later = await search(client, user_id=user, query="hiking", after="2023-05-10T09:00:00Z")
    assert {r["id"] for r in later["results"]} == {ids["may"], ids["feb"]}
    bad = await client.post("/v1/search", json={"user_id": user, "query": "hiking", "after": "2024-01-01T00:00:00Z",
                                                "before": "2023-01-01T00:00:00Z"})
    assert bad.status_code == 422 and "after" in bad.text


async def test_a_time_phrase_ranks_the_memory_from_that_period_first(client: httpx.AsyncClient) -> None:
    user = unique("phrase")
    times = ["2023-01-12T10:00:00Z", "2023-05-14T10:00:00Z", "2023-09-20T10:00:00Z"]
    ids = [await stored(client, user_id=user, category="interaction", content=f"Sam and I went to the lake {n}",
                        occurred_at=t) for n, t in zip(("again", "once more", "one more time"), times, strict=True)]
    answer = await search(client, user_id=user, query="what did we do at the lake in May 2023?", limit=3)
    assert answer["time_window"]["period"] == "month"
    assert answer["time_window"]["start"].startswith("2023-05-01")
    top = answer["results"][0]
    assert top["id"] == ids[1] and signals(top)["time"] == 1
    plain = await search(client, user_id=user, query="what did we do at the lake?", limit=3)
    assert plain["time_window"] is None
    assert all("time" not in signals(r) for r in plain["results"])


async def test_a_time_named_by_an_event_ranks_the_memory_from_before_it_first(client: httpx.AsyncClient) -> None:
    """"the week before the concert": the concert is dated by the memory about it, the window is the week
    before that day, and the memory from that week comes first although all three share the query's words."""
    user = unique("event")
    await stored(client, user_id=user, category="interaction", content="The Vetiver concert was loud and great",
                 occurred_at="2023-06-20T21:00:00Z")
    lines = {"2023-03-02T10:00:00Z": "I practised guitar with Rosa in the park",
             "2023-06-16T10:00:00Z": "I practised guitar with Rosa at home",
             "2023-07-01T10:00:00Z": "I practised guitar with Rosa at the studio"}
    ids = {t: await stored(client, user_id=user, category="interaction", content=c, occurred_at=t)
           for t, c in lines.items()}
    answer = await search(client, user_id=user, query="When did I practise guitar the week before the concert?",
                          limit=3)
    window = answer["time_window"]
    assert window["phrase"] == "week before the concert" and window["period"] == "week"
    assert window["start"].startswith("2023-06-13") and window["end"].startswith("2023-06-20")
    top = answer["results"][0]
    assert top["id"] == ids["2023-06-16T10:00:00Z"] and signals(top)["time"] == 1
    after = await search(client, user_id=user, query="guitar practice the month after the concert", limit=3)
    assert after["time_window"]["start"].startswith("2023-06-21")
    assert after["results"][0]["id"] == ids["2023-07-01T10:00:00Z"] and signals(after["results"][0])["time"] == 1
    unknown = await search(client, user_id=user, query="guitar the week before the marathon", limit=3)
    assert unknown["time_window"] is None  # no memory names the event: no window, no guess


async def test_search_results_carry_occurred_at_and_users_stay_apart(client: httpx.AsyncClient) -> None:
    alice, bob = unique("alice"), unique("bob")
    mine = await stored(client, user_id=alice, category="interaction", content="Kafka cluster Zeta is down")
    await stored(client, user_id=bob, category="interaction", content="Kafka cluster Zeta is down")
    answer = await search(client, user_id=alice, query="Kafka Zeta", limit=10)
    assert [r["id"] for r in answer["results"]] == [mine]
    assert answer["results"][0]["occurred_at"] == answer["results"][0]["created_at"]


async def test_the_service_runs_a_search_before_its_first_request(tmp_path: Path) -> None:
    """The lifespan warms the search path (Neo4j plans the retriever's statement, dateparser loads) before the
    app answers, with a user id no API key can name, so nobody's memories are read."""
    from prometheus_client import REGISTRY

    from tests.integration.conftest import running_app

    def fused_searches() -> float:
        return REGISTRY.get_sample_value("memory_search_duration_seconds_count", {"retriever": "fused"}) or 0.0

    before = fused_searches()
    async with running_app(tmp_path) as (client, _deps):
        assert fused_searches() - before == 2  # both warm-up queries ran, before any request was sent
        assert gc.get_freeze_count() == 0  # only `python -m service` freezes its heap (freeze_heap), not a test's app
        assert re.fullmatch(ID_PATTERN, "_warm-up") is None
        resp = await client.post("/v1/search", json={"query": "what did Warm Up plan", "user_id": "_warm-up"})
        assert resp.status_code == 422 and "user_id" in resp.text  # no API caller can ask for that user
