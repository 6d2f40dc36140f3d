"""Entity identity on the real graph: the resolution gate on writes, the review queue, reversible
merges, and resolution in reads. Real Neo4j, the real gate, all-MiniLM-L6-v2 for the names."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from scripts.bench import graph_probe as probe
from service.core.domain import Memory, Scope, content_hash
from service.stores.graph import EntityRef, MemoryLinks, RelationRef
from service.stores.neo4j.rows import entity_id
from service.stores.neo4j.store import Neo4jGraphStore
from tests.conftest import gated_graph_store

T0 = "2026-01-01T00:00:00+00:00"
NOW = "2026-06-01T12:00:00+00:00"


@pytest.fixture(scope="module")
async def store() -> AsyncIterator[Neo4jGraphStore]:
    async with gated_graph_store() as s:
        yield s


def user() -> str:
    return f"id-{uuid.uuid4().hex[:12]}"


async def say(store: Neo4jGraphStore, user_id: str, *entities: tuple[str, str], project: str | None = None,
              relations: tuple[tuple[str, str, str], ...] = ()) -> Memory:
    """One memory that mentions these (name, type) entities and states these (subject, predicate, object)."""
    text = "note: " + ", ".join(n for n, _ in entities) + f" {uuid.uuid4().hex[:6]}"
    m = Memory(id=str(uuid.uuid4()), user_id=user_id, content=text, category="personal_fact",
               scope=Scope.PROJECT if project else Scope.GLOBAL, project_id=project, hash=content_hash(text),
               created_at=T0, updated_at=T0)
    links = MemoryLinks(m.id, [EntityRef(n, t) for n, t in entities],
                        [RelationRef(s, p, o, f"{s} {p} {o}") for s, p, o in relations])
    await store.memories.upsert_memories([m], [links])
    return m


def eid(user_id: str, name: str, group: str = "global") -> str:
    return entity_id(user_id, group, name)


async def nodes(store: Neo4jGraphStore, user_id: str) -> dict[str, dict[str, Any]]:
    return {str(n["name"]): n for n in await probe.entities(store, user_id)}


async def mentioned(store: Neo4jGraphStore, user_id: str, m: Memory) -> list[str]:
    return (await store.reads.mentions_of(user_id, [m.id])).get(m.id, [])


async def copies(store: Neo4jGraphStore, user_id: str, source_id: str) -> dict[str, int]:
    """The edges a merge of the source copied onto its target, by type."""
    return await probe.merge_copies(store, user_id, source_id)


async def test_exact_alias_and_key_merge_with_the_alias_recorded(store: Neo4jGraphStore) -> None:
    u = user()
    await say(store, u, ("Kubernetes", "tool"), ("TypeScript", "language"))
    m = await say(store, u, ("k8s", "tool"), ("Type Script", "language"))  # a lexicon alias, a spacing variant
    found = await nodes(store, u)
    assert set(found) == {"Kubernetes", "TypeScript"}  # no node of their own
    assert "k8s" in found["Kubernetes"]["aliases"] and "Type Script" in found["TypeScript"]["aliases"]
    assert sorted(await mentioned(store, u, m)) == sorted([eid(u, "Kubernetes"), eid(u, "TypeScript")])
    again = await say(store, u, ("K8S", "tool"))  # an alias of a merged spelling, another case: the same node
    assert await mentioned(store, u, again) == [eid(u, "Kubernetes")]


async def test_a_near_variant_becomes_a_pending_pair_in_the_queue(store: Neo4jGraphStore) -> None:
    u = user()
    await say(store, u, ("Melanie", "person"))
    await say(store, u, ("Mel", "person"))
    found = await nodes(store, u)
    assert set(found) == {"Melanie", "Mel"}
    rows, cursor = await store.curation.list_duplicates(u, None, 10, None)
    assert cursor is None and len(rows) == 1
    pair = rows[0]
    assert (pair["source"]["name"], pair["target"]["name"]) == ("Mel", "Melanie")
    assert 0.85 <= pair["pair"]["score"] < 0.95 and pair["pair"]["match_type"] == "short_name"
    assert "fuzzy=" in pair["pair"]["reason"] and "semantic=" in pair["pair"]["reason"]
    assert pair["source"]["mentions"] == 1 and pair["target"]["mentions"] == 1
    node = await store.curation.entity(u, eid(u, "Mel"))
    assert node["id"] == eid(u, "Mel")
    listed = (await store.reads.list_nodes(u, None, 10, None)).items
    mel = next(i for i in listed if i["name"] == "Mel")
    assert mel["resolution_action"] == "pending" and mel["resolution_match_type"] == "short_name"


async def test_hard_negatives_and_other_types_stay_apart(store: Neo4jGraphStore) -> None:
    u = user()
    await say(store, u, ("Java", "language"), ("Jordan", "place"))
    m = await say(store, u, ("JavaScript", "language"), ("Jordan", "person"))
    found = {(n["name"], n["type"]) for n in await probe.entities(store, u)}
    assert found == {("Java", "language"), ("JavaScript", "language"), ("Jordan", "place"), ("Jordan", "person")}
    assert (await store.curation.list_duplicates(u, None, 10, None))[0] == []
    person = next(n for n in await probe.entities(store, u) if n["type"] == "person")
    assert person["id"] in await mentioned(store, u, m) and eid(u, "Jordan") not in await mentioned(store, u, m)


async def test_confirm_merges_with_copies_marked_and_unmerge_restores(store: Neo4jGraphStore) -> None:
    u = user()
    first = await say(store, u, ("Melanie", "person"), ("painting", "thing"),
                      relations=(("Melanie", "likes", "painting"),))
    second = await say(store, u, ("Mel", "person"), ("hiking", "thing"), relations=(("Mel", "likes", "hiking"),))
    mel, melanie = eid(u, "Mel"), eid(u, "Melanie")
    before = await store.curation.entity(u, melanie)

    done = await store.curation.review_duplicate(u, mel, melanie, True, "tester", NOW)
    assert done["merged_into"] == melanie
    source = await store.curation.entity(u, mel)
    target = await store.curation.entity(u, melanie)
    assert source["merged_into"] == melanie
    assert "Mel" in target["aliases"]
    assert await copies(store, u, mel) == {"MENTIONS": 1, "RELATES": 1}
    assert (await store.curation.list_duplicates(u, None, 10, None))[0] == []  # no longer pending
    assert (await store.curation.graph_stats(u, None, NOW))["confirmed"] == 1
    # listings show the merged entity's edge once (the copy), and searches reach both memories from either name
    edges = (await store.reads.list_edges(u, None, 50, None)).items
    assert sorted((e["source"], e["target"]) for e in edges) == [("Melanie", "hiking"), ("Melanie", "painting")]
    for query in ("Mel", "Melanie"):
        found = {mid for mid, _ in await probe.search_memories(store, u, ["global"], query, 10)}
        assert {first.id, second.id} <= found, query
    # a later mention of the merged spelling goes to the target
    later = await say(store, u, ("Mel", "person"))
    assert await mentioned(store, u, later) == [melanie]
    # idempotent
    await store.curation.merge_entities(u, mel, melanie, NOW)
    assert await copies(store, u, mel) == {"MENTIONS": 1, "RELATES": 1}

    await store.curation.unmerge_entity(u, mel, NOW)
    source = await store.curation.entity(u, mel)
    target = await store.curation.entity(u, melanie)
    assert source.get("merged_into") is None
    assert sorted(target["aliases"]) == sorted(before["aliases"])
    assert await copies(store, u, mel) == {}
    after = await mentioned(store, u, second)
    assert mel in after and melanie not in after  # the source keeps its own edges, the copy is gone
    edges = (await store.reads.list_edges(u, None, 50, None)).items
    assert sorted((e["source"], e["target"]) for e in edges) == [("Mel", "hiking"), ("Melanie", "painting")]
    rows, _ = await store.curation.list_duplicates(u, None, 10, None)
    assert [(r["source"]["id"], r["target"]["id"]) for r in rows] == [(mel, melanie)]  # for review again


async def test_reject_is_never_proposed_again(store: Neo4jGraphStore) -> None:
    u = user()
    await say(store, u, ("Melanie", "person"))
    m1 = await say(store, u, ("Mel", "person"))
    mel, melanie = eid(u, "Mel"), eid(u, "Melanie")
    done = await store.curation.review_duplicate(u, mel, melanie, False, "tester", NOW)
    assert done["status"] == "rejected"
    assert (await store.curation.list_duplicates(u, None, 10, None))[0] == []
    m2 = await say(store, u, ("Mel", "person"))
    assert (await store.curation.list_duplicates(u, None, 10, None))[0] == []
    stats = await store.curation.graph_stats(u, None, NOW)
    assert stats["rejected"] == 1 and stats["pending"] == 0
    # even after Mel's memories are erased (the node goes with them) and Mel is mentioned afresh
    await store.memories.remove_memories([m1.id, m2.id], NOW, user_id=u, erase=True)
    assert "Mel" not in await nodes(store, u)
    await say(store, u, ("Mel", "person"))
    assert "Mel" in await nodes(store, u)
    assert (await store.curation.list_duplicates(u, None, 10, None))[0] == []  # Melanie remembers the rejection
    assert (await store.curation.entity(u, mel))["id"] == mel


async def test_no_resolution_across_users_or_projects(store: Neo4jGraphStore) -> None:
    a, b = user(), user()
    await say(store, a, ("Kubernetes", "tool"), ("Melanie", "person"))
    mb = await say(store, b, ("k8s", "tool"), ("Mel", "person"))
    assert set(await nodes(store, b)) == {"k8s", "Mel"}
    assert await mentioned(store, b, mb) == sorted([eid(b, "k8s"), eid(b, "Mel")])
    assert (await store.curation.list_duplicates(b, None, 10, None))[0] == []
    mp = await say(store, a, ("k8s", "tool"), ("Mel", "person"), project="p1")
    group = "project--p1"
    assert await mentioned(store, a, mp) == sorted([eid(a, "k8s", group), eid(a, "Mel", group)])
    assert (await store.curation.list_duplicates(a, None, 10, None))[0] == []


async def test_merge_refuses_what_must_not_merge(store: Neo4jGraphStore) -> None:
    from service.core.errors import Conflict, DomainError, NotFound

    u, other = user(), user()
    await say(store, u, ("Rust", "language"), ("Ruby", "person"), ("Go", "language"))
    await say(store, u, ("Rust", "language"), project="p2")
    await say(store, other, ("Rust", "language"))
    with pytest.raises(DomainError, match="never merge"):
        await store.curation.merge_entities(u, eid(u, "Ruby"), eid(u, "Rust"), NOW)
    with pytest.raises(DomainError, match="groups"):
        await store.curation.merge_entities(u, eid(u, "Rust", "project--p2"), eid(u, "Rust"), NOW)
    with pytest.raises(NotFound):
        await store.curation.merge_entities(u, eid(other, "Rust"), eid(u, "Go"), NOW)
    await store.curation.merge_entities(u, eid(u, "Go"), eid(u, "Rust"), NOW)
    with pytest.raises(Conflict, match="merged into"):  # into an entity that is itself merged
        await store.curation.merge_entities(u, eid(u, "Rust"), eid(u, "Go"), NOW)
    with pytest.raises(Conflict, match="not merged"):
        await store.curation.unmerge_entity(u, eid(u, "Rust"), NOW)
    with pytest.raises(NotFound):
        await store.curation.review_duplicate(u, eid(u, "Go"), eid(u, "Rust"), False, None, NOW)


async def test_a_name_without_letters_is_written(store: Neo4jGraphStore) -> None:
    u = user()
    await say(store, u, ("--", "thing"))  # its key is empty: no embedding, no vector query
    await say(store, u, ("C++", "language"), ("C", "language"))
    assert set(await nodes(store, u)) == {"--", "C++", "C"}
