"""The job kind of the entity communities (registered in service/registry.py); a structured graph write is a memory
write (service/tasks/jobs.py `GraphWriteJob`)."""

from __future__ import annotations

from typing import Literal

from service.tasks.jobs import JobModel


class CommunityJob(JobModel):
    """Rebuild the entity communities of one user (None: every user's)."""

    kind: Literal["communities"] = "communities"
    user_id: str | None = None
