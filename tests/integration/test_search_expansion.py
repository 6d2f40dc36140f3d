"""Retrieval step two's graph experiments (docs/retrieval.md "ideas measured alone"), on the real stack (Redis,
Neo4j, Qdrant Edge, ARQ worker; hash embedder, offline link finder): entity-linked expansion from the first hits
(SEARCH_EXPANSION_WEIGHT) and the graph retriever's decomposition of a query on the entities it names
(GRAPH_DECOMPOSE)."""

from __future__ import annotations

import asyncio

import httpx

from service.deps import Deps
from service.search.expansion import expansion
from service.search.fusion import fuse
from service.search.graph import GraphRetriever, named_in
from service.search.retriever import Query
from service.stores.vector import MemoryFilter, RankRequest
from tests.conftest import unique
from tests.integration.conftest import searcher_of, write_raw


async def remember(client: httpx.AsyncClient, user: str, content: str) -> str:
    done = await write_raw(client, user_id=user, category="interaction", content=content)
    memory_id: str = done["result"]["memories"][0]["id"]
    return memory_id


def query(deps: Deps, text: str, user: str, limit: int = 10) -> Query:
    embed = searcher_of(deps).query_vector
    return Query(text, user, None, MemoryFilter(user_id=user), limit, embed, asyncio.ensure_future(embed(text)))


async def test_expansion_finds_a_memory_sharing_a_rare_entity_with_the_first_hit(client: httpx.AsyncClient,
                                                                                 deps: Deps) -> None:
    """The second memory about the kitten shares no word with the question, only the kitten's name with the memory
    the question finds; the speaker, named by every memory, links nothing."""
    user = unique("expand")
    adopted = await remember(client, user, "Marta: I adopted a kitten and named her Whiskers")
    vase = await remember(client, user, "Marta: this morning Whiskers knocked the vase off the shelf")
    films = [await remember(client, user, f"Marta: we watched film number {i} tonight") for i in range(5)]
    q = query(deps, "Which pet did she adopt?", user)
    [plain] = await deps.vectors.rank([RankRequest(q.flt, 10, text=q.text)])
    assert [mid for mid, _ in plain][:1] == [adopted] and vase not in dict(plain)

    ranker = searcher_of(deps).graph_ranker
    linked = await expansion(deps.graph, ranker, fuse({"lexical": plain}, {"lexical": 1.0}, 5.0), q, 60.0)
    assert [mid for mid, _ in linked] == [vase]  # not the seed itself, not the speaker's other memories
    assert not set(films) & set(dict(linked))
    assert await expansion(deps.graph, ranker, [], q, 60.0) == []


async def test_decomposition_gives_each_named_entity_its_own_memories(client: httpx.AsyncClient,
                                                                      deps: Deps) -> None:
    """A question about two people: ranked together, the one whose memories match its words better fills the list;
    decomposed, each person's best memory comes first."""
    user = unique("decompose")
    jon = [await remember(client, user, f"Jon: I destress by dancing, dancing helps me destress after day {i}")
           for i in range(4)]
    gina = await remember(client, user, "Gina: yoga on the beach is how I unwind")
    text = "How do Jon and Gina both like to destress?"
    assert named_in(text, ["Jon", "Gina", "jon"]) == ["Gina", "Jon"]

    # a shared test Neo4j may be slow
    patient = {"timeout_s": 60.0, "entity_weight": deps.settings.calibration.graph_entity}
    together = GraphRetriever(deps.vectors, deps.graph, deps.settings.search, **patient)
    decompose = deps.settings.search.model_copy(update={"graph_decompose": True})
    apart = GraphRetriever(deps.vectors, deps.graph, decompose, **patient)
    joint = [mid for mid, _ in (await together.retrieve(query(deps, text, user, limit=3))).hits]
    split = [mid for mid, _ in (await apart.retrieve(query(deps, text, user, limit=3))).hits]
    assert len(joint) == 3 and set(joint) <= set(jon)
    assert gina in split[:2] and split[0] in (gina, *jon) and len(set(split) & set(jon)) == 2
    # one entity named: nothing to decompose, the same list either way
    single = "How does Jon like to destress?"
    assert ((await apart.retrieve(query(deps, single, user, limit=3))).hits
            == (await together.retrieve(query(deps, single, user, limit=3))).hits)
