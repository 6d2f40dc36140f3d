"""Store Protocols of the two tiers beside memories: task traces (runs) and conversations.

Backend: `service/stores/neo4j/runs.py` (`RunWriteStore`), `run_reads.py` (`RunReadStore`) and `conversations.py`
(`ConversationStore`), parts of the Neo4j backend (`GraphStore.runs`, `.run_reads`, `.conversations`);
service/deps.py hands each service the part it uses. All Cypher lives
in the backend. Vectors arrive ready (embedded before any transaction); touched entities are resolved by the
graph's identity gate inside the write's transaction, like a memory's entities.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from service.stores.reports import GraphReport


@dataclass(frozen=True)
class RunWrite:
    """One part (or all) of a run, as the worker writes it. `steps[i]["tool_calls"]` carry their ids."""

    user_id: str
    run_id: str
    accepted_at: str
    start: dict[str, Any] | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    outcome: dict[str, Any] | None = None
    task_vec: list[float] | None = None
    summary_vec: list[float] | None = None
    vec_model: str | None = None
    restore: bool = False  # an import: write even over a tombstone newer than `accepted_at`


@dataclass(frozen=True)
class RunFilter:
    user_id: str
    project_id: str | None = None  # with it: that project's runs and the runs of no project
    outcome: str | None = None  # success | failure | open
    tool: str | None = None  # a run with a tool call of this tool (case-insensitive)
    error_kind: str | None = None  # the run's or one of its tool calls' error kind


class RunWriteStore(Protocol):
    async def write_run(self, run: RunWrite) -> GraphReport | None:
        """MERGE the run, its steps and tool calls (touched entities resolved): what the gate did with the touched
        entities. None: the run was deleted after this write was accepted (nothing written)."""

    async def delete_run(self, user_id: str, run_id: str, before: str) -> bool:
        """Erase the run, its steps and tool calls (a tombstone of ids and times stays, so a part accepted
        before the delete and run after it writes nothing). False: no such run."""

    async def erase_runs(self, user_id: str, before: str) -> int:
        """Every run of the user accepted before `before`."""

    async def expire_runs(self, before: str, user_id: str | None = None) -> int:
        """Retention: erase runs created before `before` (of every user, or of one)."""


class RunReadStore(Protocol):
    async def get_run(self, user_id: str, run_id: str) -> dict[str, Any] | None:
        """The run's properties and counts, `step_rows` and `call_rows` (each with `step_seq`, `touched`), unordered."""

    async def list_runs(self, user_id: str, session_id: str | None, project_id: str | None, limit: int,
                        cursor: str | None) -> tuple[list[dict[str, Any]], str | None]: ...

    async def run_summaries(self, user_id: str, run_ids: list[str]) -> list[dict[str, Any]]: ...

    async def dense_runs(self, flt: RunFilter, vector: list[float], model: str, k: int) -> list[tuple[str, float]]:
        """Run ids by the best cosine of their task or summary vector to `vector`, best first."""

    async def lexical_runs(self, flt: RunFilter, query: str, k: int
                           ) -> tuple[list[tuple[str, float]], list[tuple[str, float, dict[str, Any]]]]:
        """Full-text hits: (run id, score) on task/summary/error kind, and (run id, score, tool call) on tool
        calls' tool, arguments, error and error kind; best first."""

    async def runs_touching(self, user_id: str, memory_ids: list[str], project_id: str | None, k: int
                            ) -> list[tuple[str, list[str], list[dict[str, Any]]]]:
        """Runs whose tool calls touched an entity these memories mention: (run id, entity names, tool calls
        that touched them), most shared entities first."""

    async def run_stats(self, user_id: str, project_id: str | None) -> dict[str, Any]: ...

    async def lessons(self, user_id: str, project_id: str | None, session_id: str | None, scan: int,
                      after: int) -> list[dict[str, Any]]:
        """The newest `scan` runs with a failed tool call (not of `session_id`; of the project and of none):
        `{run, failed: its last failed call, after: up to `after` successful calls that followed it}`."""


class RunStore(RunReadStore, RunWriteStore, Protocol):
    """Both halves of the runs (an export and an import of them)."""


class ConversationStore(Protocol):
    async def store_messages(self, user_id: str, session_id: str, project_id: str | None, accepted_at: str,
                             rows: list[dict[str, Any]], restore: bool = False) -> int:
        """MERGE the messages (rows: id, position, ord, role, content, timestamp, task_id, memory_ids) under the
        session. Returns how many are stored (0: the session was deleted after the write was accepted)."""

    async def list_sessions(self, user_id: str, project_id: str | None, limit: int,
                            cursor: str | None) -> tuple[list[dict[str, Any]], str | None]: ...

    async def session(self, user_id: str, session_id: str) -> dict[str, Any] | None: ...

    async def session_messages(self, user_id: str, session_id: str, limit: int,
                               cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        """Messages in order (write acceptance, then position in the write)."""

    async def search_messages(self, user_id: str, query: str, project_id: str | None, k: int
                              ) -> list[tuple[dict[str, Any], float]]:
        """Full-text hits over the user's messages (with their `session_id`), best first."""

    async def delete_session(self, user_id: str, session_id: str, before: str) -> int: ...

    async def erase_messages_of(self, user_id: str, memory_ids: list[str]) -> int:
        """Deleting a memory erases the messages it came from (their text is the memory's)."""

    async def expire_messages(self, before: str, user_id: str | None = None) -> int:
        """Retention: erase messages written before `before` (of every user, or of one); a session left without
        messages goes too."""



class EntitySearch(Protocol):
    async def search_entities(self, user_id: str, groups: list[str], query: str, limit: int
                              ) -> list[dict[str, Any]]:
        """The entities `query` names (full text over names and aliases, or the whole query as a name), best first:
        `{id, name, type, group_id, aliases, mentions, related: [names of live fact neighbours], score}`."""
