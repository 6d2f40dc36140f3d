"""The ARQ function each job kind is enqueued under: a queued job names it, so a name never changes. The task queue
(service/tasks/queue.py) enqueues by this table; service/registry.py gives each kind its model, handler and retry
policy, and registers every name here (tests/unit/test_layers.py holds that both list the same kinds)."""

from __future__ import annotations

FUNCTIONS: dict[str, str] = {  # job kind -> its ARQ function
    "raw": "memory_raw",
    "raw_batch": "memory_raw_batch",
    "conversation": "memory_conversation",
    "update": "memory_update",
    "delete": "memory_delete",
    "import": "memory_import",
    "dedup": "maintenance_dedup",
    "reconcile": "maintenance_reconcile",
    "reembed": "maintenance_reembed",
    "optimize": "maintenance_optimize",
    "run": "run_write",
    "run_delete": "run_delete",
    "conversation_delete": "conversation_delete",
    "graph_write": "graph_write",
    "communities": "graph_communities",
}
