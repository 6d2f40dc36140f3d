"""Two things of one name: through the real graph store (real Neo4j, the real gate), a
same-spelled name whose memory gives it a role that disagrees with the held entity's is another entity, with a
pending pair to review, never a merge; a mention with the same role, or with none, is the held entity."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from scripts.bench import graph_probe as probe
from service.core.domain import Memory, Scope, content_hash
from service.stores.graph import EntityRef, MemoryLinks, RelationRef
from service.stores.neo4j.rows import entity_id
from service.stores.neo4j.store import Neo4jGraphStore
from tests.conftest import gated_graph_store

T0 = "2026-01-01T00:00:00+00:00"


@pytest.fixture(scope="module")
async def store() -> AsyncIterator[Neo4jGraphStore]:
    async with gated_graph_store() as s:
        yield s


async def write(store: Neo4jGraphStore, user_id: str, text: str, name: str, kind: str = "person",
                role: str | None = None, pinned: str | None = None) -> str:
    """One memory naming one entity (by its id when `pinned`); the id of the entity its mention points at."""
    m = Memory(id=str(uuid.uuid4()), user_id=user_id, content=text, category="personal_fact", scope=Scope.GLOBAL,
               project_id=None, hash=content_hash(text), created_at=T0, updated_at=T0)
    await store.memories.upsert_memories([m], [MemoryLinks(m.id, [EntityRef(name, kind, role=role, id=pinned)])])
    [entity] = (await store.reads.mentions_of(user_id, [m.id]))[m.id]
    return entity


async def test_a_homonym_with_another_role_is_its_own_entity_and_a_pending_pair(store: Neo4jGraphStore) -> None:
    u = f"mean-{uuid.uuid4().hex[:12]}"
    plumber = await write(store, u, "John Smith, the plumber, quoted $450 for the valve.", "John Smith")
    assert plumber == entity_id(u, "global", "John Smith")
    vp = await write(store, u, "Our new VP of Sales, John Smith, wants weekly pipeline reports.", "John Smith")
    assert vp != plumber  # not merged: two nodes of one name
    rows, _ = await store.curation.list_duplicates(u, None, 10, None)
    assert [(r["source"]["id"], r["target"]["id"], r["pair"]["match_type"]) for r in rows] == [
        (vp, plumber, "other_role")]
    assert "other role" in rows[0]["pair"]["reason"]
    assert (rows[0]["source"]["roles"], rows[0]["target"]["roles"]) == (["vp of sales"], ["plumber"])  # for review
    # later mentions find their meaning by its role (another head phrase of it)
    assert await write(store, u, "John Smith, our plumber, fixed the radiator.", "John Smith") == plumber
    assert await write(store, u, "Sent the Q3 numbers to John Smith, the VP of Sales.", "John Smith") == vp
    names = sorted(n["name"] for n in await probe.entities(store, u))
    assert names == ["John Smith", "John Smith"]


async def test_a_mention_with_no_role_among_several_meanings_goes_to_review(store: Neo4jGraphStore) -> None:
    """Which John Smith "John Smith called back" means is the reviewer's call (ambiguity): not a merge into the
    first meaning, but one node for such mentions with a pending pair to each meaning."""
    u = f"mean-{uuid.uuid4().hex[:12]}"
    plumber = await write(store, u, "John Smith, the plumber, quoted $450 for the valve.", "John Smith")
    vp = await write(store, u, "Our new VP of Sales, John Smith, wants weekly pipeline reports.", "John Smith")
    unplaced = await write(store, u, "John Smith called back.", "John Smith")
    assert unplaced not in (plumber, vp)
    rows, _ = await store.curation.list_duplicates(u, None, 10, None)
    pairs = sorted((r["target"]["id"], r["pair"]["match_type"]) for r in rows if r["source"]["id"] == unplaced)
    assert pairs == sorted([(plumber, "exact"), (vp, "exact")])
    assert all("ambiguous" in r["pair"]["reason"] for r in rows if r["source"]["id"] == unplaced)
    # the next mention with no role joins those, one with a role its meaning
    assert await write(store, u, "John Smith left a voicemail.", "John Smith") == unplaced
    assert await write(store, u, "John Smith, our plumber, sent the invoice.", "John Smith") == plumber
    # a write that names the entity by its id (a structured graph write) is that entity, whatever the text says
    assert await write(store, u, "John Smith called.", "John Smith", pinned=plumber) == plumber
    assert await write(store, u, "John Smith, the VP of Sales, called.", "John Smith", pinned=plumber) == plumber
    assert len(await probe.entities(store, u)) == 3


async def test_one_meaning_alone_still_takes_a_mention_with_no_role(store: Neo4jGraphStore) -> None:
    """The negative of the above: a name with one meaning held (and another family's node of the name) is not
    ambiguous, so a mention with no role is that entity."""
    u = f"mean-{uuid.uuid4().hex[:12]}"
    place = await write(store, u, "We hiked in Jordan last spring.", "Jordan", "place")
    person = await write(store, u, "Jordan, the plumber, fixed the sink.", "Jordan")
    assert person != place
    assert await write(store, u, "Jordan called back.", "Jordan") == person
    assert await write(store, u, "Jordan was sunny.", "Jordan", "place") == place
    assert len(await probe.entities(store, u)) == 2


async def test_a_rejected_pair_of_meanings_does_not_stop_a_third_from_being_proposed(store: Neo4jGraphStore) -> None:
    """Rejecting "John Smith (plumber)" / "John Smith (VP)" says those two are not one; it says nothing of the next
    John Smith, so a third meaning is still proposed against both, and the rejected pair does not come back."""
    u = f"mean-{uuid.uuid4().hex[:12]}"
    plumber = await write(store, u, "John Smith, the plumber, quoted $450.", "John Smith")
    vp = await write(store, u, "John Smith, our VP of Sales, wants reports.", "John Smith")
    await store.curation.review_duplicate(u, vp, plumber, False, "tester", T0)
    assert await write(store, u, "John Smith, the plumber, came back.", "John Smith") == plumber
    neighbour = await write(store, u, "My neighbor John Smith waters the plants.", "John Smith")
    rows, _ = await store.curation.list_duplicates(u, None, 10, None)
    assert sorted((r["source"]["id"], r["target"]["id"]) for r in rows) == sorted(
        [(neighbour, plumber), (neighbour, vp)])


async def test_a_homonym_with_no_role_or_the_same_role_is_one_entity(store: Neo4jGraphStore) -> None:
    u = f"mean-{uuid.uuid4().hex[:12]}"  # the negative of the above: nothing says they are two
    first = await write(store, u, "Giulia Bianchi is my new physiotherapist for the knee rehab.", "Giulia Bianchi")
    assert await write(store, u, "Giulia Bianchi invited us to her housewarming.", "Giulia Bianchi") == first
    assert await write(store, u, "My physical therapist Giulia Bianchi moved our session.", "Giulia Bianchi") == first
    assert (await store.curation.list_duplicates(u, None, 10, None))[0] == []


async def test_an_extractors_stated_role_is_used_before_the_text(store: Neo4jGraphStore) -> None:
    u = f"mean-{uuid.uuid4().hex[:12]}"
    gym = await write(store, u, "Apex is where I boulder on Tuesdays.", "Apex", "organization", role="climbing gym")
    firm = await write(store, u, "Apex rejected my application.", "Apex", "organization", role="a logistics firm")
    assert firm != gym
    assert await write(store, u, "Renewed my pass at Apex.", "Apex", "organization", role="the climbing gym") == gym


async def test_a_third_meaning_is_proposed_against_both(store: Neo4jGraphStore) -> None:
    u = f"mean-{uuid.uuid4().hex[:12]}"
    plumber = await write(store, u, "John Smith, the plumber, quoted $450.", "John Smith")
    vp = await write(store, u, "John Smith, our VP of Sales, wants reports.", "John Smith")
    neighbour = await write(store, u, "My neighbor John Smith waters the plants.", "John Smith")
    assert len({plumber, vp, neighbour}) == 3
    rows, _ = await store.curation.list_duplicates(u, None, 10, None)
    assert sorted(r["target"]["id"] for r in rows if r["source"]["id"] == neighbour) == sorted([plumber, vp])


async def test_one_write_naming_two_meanings_keeps_them_apart(store: Neo4jGraphStore) -> None:
    """A batch (one graph write) with both John Smiths: two entities, a pending pair, each memory's fact on its own
    node; the first meaning's later mentions join it, as across writes."""
    u = f"mean-{uuid.uuid4().hex[:12]}"
    texts = ("John Smith, the plumber, fixed the sink.", "Our new VP of Sales, John Smith, approved the plan.",
             "John Smith, our plumber, fixed the radiator.")
    batch = [Memory(id=str(uuid.uuid4()), user_id=u, content=t, category="personal_fact", scope=Scope.GLOBAL,
                    project_id=None, hash=content_hash(t), created_at=T0, updated_at=T0) for t in texts]
    await store.memories.upsert_memories(batch, [
        MemoryLinks(m.id, [EntityRef("John Smith", "person")], [RelationRef("John Smith", "met", "user", m.content)])
        for m in batch])
    mentioned = await store.reads.mentions_of(u, [m.id for m in batch])
    plumber, vp, again = (set(mentioned[m.id]) - {entity_id(u, "global", "user")} for m in batch)
    assert plumber == again and plumber != vp and len(plumber | vp) == 2
    rows, _ = await store.curation.list_duplicates(u, None, 10, None)
    assert [r["pair"]["match_type"] for r in rows] == ["other_role"]
    assert {r["source"]["id"] for r in rows} | {r["target"]["id"] for r in rows} == plumber | vp
    facts = {(r["source"], r["target"]) for r in await probe.relations(store, u)}
    assert len(await probe.relations(store, u)) == 2 and facts == {("John Smith", "user")}  # one fact per meaning
    assert await write(store, u, "John Smith, the plumber, sent the invoice.", "John Smith") in plumber


async def test_a_meaning_has_one_node_whichever_way_it_is_written(store: Neo4jGraphStore) -> None:
    """A name held as a place, then two people of that name: the VP's node is the same whether the VP comes in a
    write of its own or in one write together with the plumber."""
    u = f"mean-{uuid.uuid4().hex[:12]}"
    place = await write(store, u, "We hiked in Jordan last spring.", "Jordan", "place")
    plumber = await write(store, u, "I work with Jordan, the plumber, on the pipes.", "Jordan")
    vp = await write(store, u, "I work with Jordan, our VP of Sales, on the plan.", "Jordan")
    assert len({place, plumber, vp}) == 3
    texts = ("Jordan, the plumber, fixed the sink.", "Jordan, our VP of Sales, approved the budget.")
    batch = [Memory(id=str(uuid.uuid4()), user_id=u, content=t, category="personal_fact", scope=Scope.GLOBAL,
                    project_id=None, hash=content_hash(t), created_at=T0, updated_at=T0) for t in texts]
    await store.memories.upsert_memories(batch, [MemoryLinks(m.id, [EntityRef("Jordan", "person")]) for m in batch])
    mentioned = await store.reads.mentions_of(u, [m.id for m in batch])
    assert [mentioned[m.id] for m in batch] == [[plumber], [vp]]
