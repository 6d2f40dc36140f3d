"""Models of maintenance runs: dedup and reconcile requests and their run reports, re-embedding, the index
build."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.core.domain import ID_PATTERN, Progress
from service.schemas.memories import AcceptedResponse
from service.schemas.page import Page


class DedupRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str | None = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN,
                                description="Only this user's memories; unset = every user")
    dry_run: bool = Field(default=False, description="Report what would be removed, remove nothing")


class DedupAccepted(AcceptedResponse):
    run_id: str
    run_url: str


class ReconcileAccepted(DedupAccepted):
    """202 of a reconcile run (its own schema name; the same fields as a dedup run's)."""


class DedupGroup(BaseModel):
    """One duplicate group: `keep` is its newest memory, `remove` the others."""

    keep: str
    remove: list[str]


class DedupPhaseReport(BaseModel):
    scanned: int = 0  # memories the phase compared
    groups: int = 0  # duplicate groups found
    removed: int = 0  # memories removed (dry run: that would be removed)
    removed_ids: list[str] = Field(default_factory=list)
    group_details: list[DedupGroup] = Field(default_factory=list)
    skipped_changed: int = 0  # not removed: the memory or its survivor changed or vanished during the run
    graph_edges_expired: int = 0
    graph_expired_edge_ids: list[str] = Field(default_factory=list)
    truncated: bool = False  # id lists cut at the report bound (counts stay exact)
    errors: list[str] = Field(default_factory=list)


class DedupUserReport(BaseModel):
    user_id: str
    boundaries: int = 0  # scopes swept: global and each project
    skipped_recent: int = 0  # memories written after the run started (never touched by it)
    exact: DedupPhaseReport = Field(default_factory=DedupPhaseReport)
    near: DedupPhaseReport = Field(default_factory=DedupPhaseReport)
    errors: list[str] = Field(default_factory=list)


class DedupGraphRetry(BaseModel):
    """The graph part of earlier runs that had failed (kept pending in Redis), retried by this run."""

    pending_before: int = 0
    retried: int = 0
    graph_edges_expired: int = 0
    pending_after: int = 0
    errors: list[str] = Field(default_factory=list)


class DedupTotals(BaseModel):
    scanned: int = 0
    exact_groups: int = 0
    exact_removed: int = 0
    near_groups: int = 0
    near_removed: int = 0
    graph_edges_expired: int = 0
    errors: int = 0


DedupStatus = Literal["queued", "running", "completed", "partial", "skipped", "failed", "interrupted"]


class DedupRunSummary(BaseModel):
    """A maintenance run: a dedup sweep (`kind` "dedup") or a full reconcile ("reconcile", whose
    `repairs` counts each kind of repair; its threshold and dedup totals stay 0)."""

    run_id: str
    kind: Literal["dedup", "reconcile"] = "dedup"
    trigger: Literal["api", "cron", "manual"]
    status: DedupStatus
    dry_run: bool
    user_id: str | None = None
    task_id: str | None = None
    threshold: float = 0.0
    batch_size: int = 0
    repairs: dict[str, int] = Field(default_factory=dict)
    queued_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    detail: str | None = None  # why skipped / partial / failed
    totals: DedupTotals = Field(default_factory=DedupTotals)
    progress: Progress | None = None  # while it runs: boundaries (dedup) or users (reconcile) done / total


class DedupRunReport(DedupRunSummary):
    graph_retry: DedupGraphRetry = Field(default_factory=DedupGraphRetry)
    users: list[DedupUserReport] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    # reconcile runs: repaired memory ids per user and kind of repair (at most 1,000 per kind)
    repaired_ids: dict[str, dict[str, list[str]]] = Field(default_factory=dict)


class OptimizeReport(BaseModel):
    status: Literal["ok"] = "ok"
    backend: str
    changed: bool
    backlog_before: int  # points outside the vector index before and after
    backlog_after: int
    figures: dict[str, Any] = Field(default_factory=dict)  # Qdrant Edge: build_seconds, swap_pause_ms, ...


class ReconcileRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str | None = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN,
                                description="Only this user's memories; unset = every user")
    dry_run: bool = Field(default=False, description="Report the drift, repair nothing")


class ReembedRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str | None = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN,
                                description="Only this user's memories; unset = every user (and, at the end, the "
                                            "vector store records the configured embedder as its own)")


class MaintenanceRunPage(Page[DedupRunSummary]):
    """The latest maintenance runs (dedup, reconcile: `kind`), newest first (`items` and `next_cursor`,
    was `runs`)."""


DedupRunList = MaintenanceRunPage  # its earlier name, kept for clients
