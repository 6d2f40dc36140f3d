"""The job kind of the structured graph writes (registered in service/registry.py)."""

from __future__ import annotations

from typing import Literal

from service.tasks.jobs import JobModel, RawItem


class GraphWriteJob(JobModel, RawItem):
    """An entity, a relation or a fact, as the memory that states it: its links are in `metadata.graph`
    (service/memory/links.py), so it reaches the graph through the memory write path and the gate."""

    kind: Literal["graph_write"] = "graph_write"
    user_id: str
    op: Literal["entity", "relation", "fact"]


class CommunityJob(JobModel):
    """Rebuild the entity communities of one user (None: every user's)."""

    kind: Literal["communities"] = "communities"
    user_id: str | None = None
