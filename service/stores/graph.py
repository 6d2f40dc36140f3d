"""Graph store Protocols. Backend: `service/stores/neo4j/`: one executor (driver, transactions, retries) shared by
small parts, each implementing one of these Protocols; service/deps.py hands each caller the part it uses.

`GraphStore` is the backend as its parts: a read-only property per part, typed with that part's Protocol, and only
what is the whole backend's (schema, health, `erase_tiers`); a caller of several parts holds it and names the part
(`graph.reads.search_facts`). `GraphRetrieval` is what the search's retrievers use, `MemoryUsers` the list of users
a run over every user walks. `MemoryGraphWrites` (`GraphStore.memories`) writes memories into the graph; only
the dual-store write owner (`service/ledger/ledger.py`, through `service/ledger/graph_writer.py`) calls it
(tests/unit/test_layers.py), so no other path writes a memory to one store and not the other. All Cypher lives
in the backend module.
`EntityNameRules` is how the backend compares entity names (implemented by `service/identity/`): the store
never imports the identity rules or an embedder, and never embeds inside a transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from service.core.domain import Memory
from service.stores.console import ConsoleReads
from service.stores.facts import CommunityStore, FactStore
from service.stores.reports import GraphReport
from service.stores.tiers import ConversationStore, EntitySearch, RunReadStore, RunWriteStore

MERGE, PENDING, CREATE = "merge", "pending", "create"


@dataclass(frozen=True)
class Candidate:
    """An entity the graph already holds (or one created earlier in the same write)."""

    id: str
    name: str
    type: str
    aliases: tuple[str, ...] = ()
    vector: Sequence[float] | None = None
    rejected: tuple[str, ...] = ()  # keys of names a reviewer said are not this entity
    roles: tuple[str, ...] = ()  # what the memories say it is ("plumber"): service/identity/roles.py


@dataclass(frozen=True)
class Resolution:
    action: str  # merge | pending | create
    score: float = 0.0
    match_type: str = "none"
    reason: str = "no candidate of a compatible type"
    target_id: str | None = None  # merge: the entity written to; pending: the entity it may be
    target_name: str | None = None
    # pending, ambiguous: the other entities the name may be (one more pending pair each)
    also: tuple[Resolution, ...] = ()


class EntityNameRules(Protocol):
    """Entity names as the graph compares them. `resolves` False: one entity per spelling (no gate, no
    name vectors)."""

    resolves: bool
    model: str  # the embedder of name vectors
    dim: int

    def keys_of(self, names: Sequence[str]) -> list[str]:
        """Every key an entity is found by (one per spelling, plus canonical names)."""

    def name_key(self, name: str) -> str: ...

    def compatible(self, a: str, b: str) -> bool:
        """Whether entities of these two types may be one entity."""

    def same_node(self, new_type: str, held_type: str) -> bool:
        """Whether an entity the graph holds under the same spelling is this write's entity, given both types."""

    def type_family(self, entity_type: str) -> str: ...

    def decide(self, name: str, entity_type: str, vector: Sequence[float] | None,
               candidates: Sequence[Candidate], roles: Sequence[str] = ()) -> Resolution: ...

    def role(self, text: str, name: str, stated: str | None = None) -> str | None:
        """What the entity so named is: the role an extractor stated, else the one the memory's text gives it ("John
        Smith, the plumber": "plumber"), as a head phrase; or None."""

    def other_meaning(self, roles: Sequence[str], held: Sequence[str]) -> str | None:
        """When an entity the graph holds under this spelling and family is another meaning (both have roles and
        none agrees): the key of this mention's meaning, which its own node's id is derived from; else None."""

    async def vectors(self, names: Sequence[str]) -> dict[str, list[float]]:
        """name key -> the embedding of the name."""


@dataclass(frozen=True)
class EntityRef:
    name: str
    type: str = "thing"
    # a structured write (service/graph_api/): more names, the entity it must be (its id), what it says of it
    aliases: tuple[str, ...] = ()
    id: str | None = None
    role: str | None = None  # what the entity is, as an extractor stated it ("plumber"); else read from the text
    description: str | None = None
    attributes: str | None = None  # a JSON object, as text (a node property cannot hold a map)


@dataclass(frozen=True)
class RelationRef:
    subject: str
    predicate: str
    object: str
    fact: str
    valid_at: str | None = None
    confidence: float | None = None  # a structured write's; kept on the edge


@dataclass(frozen=True)
class GraphProposal:
    """What the graph retriever proposes for a query: memories with their graph scores (best first) and the
    names and aliases of the entities the query matched."""

    memories: list[tuple[str, float]]
    names: list[str]


@dataclass(frozen=True)
class MemoryLinks:
    """What one memory says in graph terms: the entities it mentions and the facts it supports."""

    memory_id: str
    entities: list[EntityRef] = field(default_factory=list)
    relations: list[RelationRef] = field(default_factory=list)


def group_id(scope: str, project_id: str | None) -> str:
    """The graph namespace (group) of one memory: "global" or "project--<id>"."""
    return "global" if scope == "global" or not project_id else f"project--{project_id}"


def groups_for(project_id: str | None) -> list[str]:
    """Graph groups a read covers: global, plus the project's."""
    return ["global"] + ([f"project--{project_id}"] if project_id else [])


def scope_of_group(group: str) -> tuple[str, str | None]:
    """("global", None) or ("project", "<id>") for a group id."""
    if group.startswith("project--"):
        return "project", group[len("project--") :]
    return "global", None


# Predicates that hold one value at a time for a subject: a new edge with another object
# invalidates the older one ("newer fact replaces older"). The one place this is declared.
SINGLE_VALUED_PREDICATES: frozenset[str] = frozenset({
    "is_named",          # user -> name
    "works_at",          # user -> organisation
    "lives_in",          # user -> place
    "has_timezone",      # user -> timezone
    "uses_indentation",  # user/project -> indentation style ("4 spaces", "tabs")
    "uses_database",     # project -> primary database
    "deploys_to",        # project -> deployment target
})


@dataclass(frozen=True)
class GraphFact:
    """One RELATES edge as reads return it."""

    id: str
    fact: str
    predicate: str
    source: str  # source entity name
    target: str  # target entity name
    group_id: str  # "global" or "project--<id>"
    valid_at: str | None
    invalid_at: str | None
    expired_at: str | None
    memory_ids: list[str]
    created_at: str | None
    score: float = 0.0  # relevance in [0, 1] for searches; 0 for listings


@dataclass(frozen=True)
class RowPage:
    """A page of graph rows (a listing or an export), with the cursor of the next."""

    items: list[dict[str, object]]
    next_cursor: str | None


class MemoryGraphWrites(Protocol):
    """The graph half of a memory's write, update, removal and import."""

    async def upsert_memories(self, memories: list[Memory], links: list[MemoryLinks] | None = None
                              ) -> GraphReport:
        """In one transaction: MERGE a (:Memory) node per memory, the (:Entity) nodes its links name
        (scoped to the memory's user and group), (:Memory)-[:MENTIONS]->(:Entity) and
        (:Entity)-[:RELATES]->(:Entity) edges whose `memory_ids` include the memory.
        Every MERGE is on a deterministic id, so a replay changes nothing. Returns what it did per memory."""

    async def replace_memory(self, memory: Memory, links: MemoryLinks, now: str) -> list[str]:
        """Update re-ingestion: the memory's node gets the new content; edges it supported that the
        new links do not restate lose its support, and those no other live memory supports get
        invalid_at = expired_at = now; the new links are MERGEd. Returns the ids of edges invalidated."""

    async def remove_memories(
        self, memory_ids: list[str], now: str, duplicate_of: dict[str, str] | None = None, *,
        user_id: str | None = None, erase: bool = False,
    ) -> list[str]:
        """Delete (or dedup when duplicate_of maps removed id -> survivor id): the (:Memory) nodes get
        deleted_at = now (and duplicate_of; a missing node becomes a tombstone of `user_id`, so a late
        write of that memory cannot bring it back); each edge drops them from memory_ids; edges left with
        no supporting memory get expired_at = now, edges the survivor (or any live memory) also
        supports keep living. Idempotent. Returns the ids of edges expired.
        `erase` (a user's delete, not dedup): the nodes keep only ids and times, edges no memory states
        any more lose their text, and entities no live memory mentions are removed with their edges."""

    async def import_graph(self, user_id: str, memories: list[Memory], entities: list[dict[str, Any]],
                           mentions: list[dict[str, str]], facts: list[dict[str, Any]]) -> None:
        """MERGE exported memories (a deleted one lives again), entities, mentions and facts by id, keeping
        every property (fact history too), in one transaction. Facts may name memories of earlier calls."""

    async def import_identity(self, user_id: str, same_as: list[dict[str, Any]], merges: list[tuple[str, str]]) -> None:
        """SAME_AS pairs of imported entities, then their merges replayed (idempotent)."""


class GraphRetrieval(Protocol):
    """The graph's part of a search: the graph retriever, supporting facts."""

    async def propose_memories(self, user_id: str, groups: list[str], query: str, limit: int) -> GraphProposal:
        """The graph retriever's candidates: (memory id, graph score) of the memories that mention an entity the
        query names (name, alias or full text) or one of its RELATES neighbours, rare entities counting more,
        best first, and the names and aliases of the entities matched. Ids of memories the vector store may no
        longer hold are possible: the caller checks."""

    async def facts_of_memories(self, user_id: str, groups: list[str], memory_ids: list[str], limit: int
                                ) -> list[GraphFact]:
        """The live facts (RELATES edges, not expired) that any of `memory_ids` supports, within `groups`,
        each once, at most `limit`."""


class RetiredFacts(Protocol):
    async def retired_by(self, user_id: str, groups: list[str], memory_ids: list[str]) -> dict[str, set[str]]:
        """The memories among `memory_ids` whose every fact newer facts of the same subject and predicate retired
        (`lives_in Lisbon` after `lives_in Porto`), each with the memories that state those newer facts. A memory
        with one live fact, or none at all, is not among them."""


class MemoryUsers(Protocol):
    async def memory_users(self, limit: int = 100_000) -> list[str]:
        """Every user that has (:Memory) nodes (the full reconcile's list, beside the vector store's)."""


class MemoryNodes(Protocol):
    async def memory_nodes(self, user_id: str, memory_ids: list[str]) -> list[dict[str, Any]]:
        """The user's (:Memory) nodes with these ids, deleted ones included (`deleted_at` set)."""


class EpisodeReads(MemoryNodes, MemoryUsers, Protocol):
    """What the full reconcile compares the vector store with (service/maintenance/reconcile.py)."""

    async def list_episodes(self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None) -> RowPage:
        """(:Memory) nodes, deleted ones included with their deleted_at / duplicate_of."""


class GraphExport(Protocol):
    """What an export reads of the graph (service/memory/portability.py `Exporter`)."""

    async def export_facts(self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None) -> RowPage:
        """Every RELATES edge of the user (history included) with all it holds: ids, validity, supporters;
        not the copies a merge made."""

    async def export_entities(self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None) -> RowPage:
        """Every entity of the user with its identity state: resolution decision, merge marker and record,
        rejected names, and its own (not copied) SAME_AS pairs."""

    async def mentions_of(self, user_id: str, memory_ids: list[str]) -> dict[str, list[str]]:
        """memory id -> the ids of the entities it MENTIONS (not the copies a merge made)."""


class GraphReadStore(GraphRetrieval, RetiredFacts, EpisodeReads, GraphExport, Protocol):
    """The reads part (neo4j/reads.py): the search's, the listings, an export's, the reconcile's."""

    async def search_facts(
        self, user_id: str, groups: list[str], query: str, limit: int, include_history: bool = False
    ) -> list[GraphFact]:
        """Facts relevant to `query` within the user's `groups`: entities matched by name, alias or
        full-text, their RELATES facts and one hop of neighbours, plus facts whose text matches.
        Only valid facts (invalid_at and expired_at null) unless include_history. Best first."""

    async def query_entities(self, user_id: str, groups: list[str], query: str) -> list[str]:
        """The entities the graph retriever starts from for `query`."""

    async def list_nodes(self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None) -> RowPage: ...

    async def list_edges(
        self, user_id: str, groups: list[str] | None, limit: int, cursor: str | None, include_history: bool = False
    ) -> RowPage: ...


class CurationStore(Protocol):
    """Entity identity and provenance (neo4j/curation.py)."""

    async def list_duplicates(self, user_id: str, groups: list[str] | None, limit: int,
                              cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        """Pending SAME_AS pairs (source, target, pair), highest score first, and the next cursor."""

    async def entity(self, user_id: str, entity_id: str) -> dict[str, Any]:
        """One entity of the user; NotFound otherwise."""

    async def review_duplicate(self, user_id: str, source_id: str, target_id: str, confirm: bool,
                               reviewer: str | None, now: str) -> dict[str, Any]:
        """Confirm (merge) or reject (never proposed again) a pending pair. NotFound without such a pair."""

    async def merge_entities(self, user_id: str, source_id: str, target_id: str, now: str,
                             reviewer: str | None = None) -> dict[str, Any]:
        """Mark the source merged into the target and copy its edges onto the target (idempotent)."""

    async def unmerge_entity(self, user_id: str, entity_id: str, now: str) -> dict[str, Any]:
        """Undo a merge: remove the copies and what the merge added to the target, clear the marker."""

    async def graph_stats(self, user_id: str, groups: list[str] | None, now: str) -> dict[str, int]:
        """memories, entities, merged, live, expired, pending, confirmed, rejected, traces."""


class TraceRecords(Protocol):
    """Retrieval traces (neo4j/traces.py)."""

    async def write_trace(self, trace: dict[str, Any]) -> None: ...

    async def trace(self, user_id: str, trace_id: str, now: str) -> dict[str, Any]:
        """One unexpired trace with its RETURNED memories and TOUCHED entities; NotFound otherwise."""

    async def traces_of_entity(self, user_id: str, entity_id: str | None, limit: int, cursor: str | None,
                               now: str) -> tuple[list[dict[str, Any]], str | None]:
        """Unexpired traces that touched the entity (all of the user's without one), newest first."""

    async def purge_traces(self, now: str) -> int:
        """Remove traces whose expires_at has passed; returns how many."""

    async def erase_traces(self, user_id: str, before: str) -> int: ...


class GraphStore(Protocol):
    """The graph backend as its parts, each behind its narrow Protocol: service/deps.py hands a caller the part it
    uses, and a caller that needs several holds this and names the part (`graph.reads.search_facts`). What concerns
    the whole backend (its schema, its health, a delete of every tier of a user) is its own."""

    name: str

    @property
    def memories(self) -> MemoryGraphWrites:
        """The graph half of memory writes: only the ledger's graph writer holds it."""

    @property
    def reads(self) -> GraphReadStore: ...

    @property
    def facts(self) -> FactStore: ...

    @property
    def entity_search(self) -> EntitySearch: ...

    @property
    def curation(self) -> CurationStore: ...

    @property
    def traces(self) -> TraceRecords: ...

    @property
    def runs(self) -> RunWriteStore: ...

    @property
    def run_reads(self) -> RunReadStore: ...

    @property
    def conversations(self) -> ConversationStore: ...

    @property
    def communities(self) -> CommunityStore: ...

    @property
    def console(self) -> ConsoleReads: ...

    @property
    def transient_retries(self) -> int:
        """Write transactions re-run on a transient error (deadlocks included)."""

    @property
    def deadlock_retries(self) -> int: ...

    async def ensure_schema(self) -> None:
        """Create constraints and indexes if missing (idempotent)."""

    async def erase_tiers(self, user_id: str, before: str) -> int:
        """A delete of everything of the user: their runs, traces and sessions written before `before`."""

    async def ping(self) -> None:
        """Raise DependencyUnavailable if the graph cannot serve requests."""

    async def close(self) -> None: ...
