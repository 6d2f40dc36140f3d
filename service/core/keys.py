"""Every Redis key name of the service, in one place (as arq keeps its own prefixes in `arq.constants`).

All of a deployment's keys start with its queue name (ARQ_QUEUE_NAME), so deployments that share a Redis stay
apart: `<queue>:<what>`. `Keys` composes the full names; the functions below it are the names the small-records
store (`RedisKV`, which adds the queue's prefix itself) keeps its records under. arq's own keys (`arq:job:<id>`,
`arq:result:<id>`, ...) are arq's, named by `arq.constants`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Keys:
    queue: str  # ARQ_QUEUE_NAME

    @property
    def prefix(self) -> str:
        """The start of every key of the deployment."""
        return f"{self.queue}:"

    def of(self, name: str) -> str:
        """A name inside the deployment (what `RedisKV` keeps its records under)."""
        return f"{self.queue}:{name}"

    # ---- the task queue (service/tasks/) -------------------------------------------------------------------------

    @property
    def task_prefix(self) -> str:
        """A task's record is `<queue>:task:<id>`; its steps' results `<queue>:task:<id>:<step>`."""
        return f"{self.queue}:task:"

    def task(self, task_id: str) -> str:
        return self.task_prefix + task_id

    def task_step(self, task_id: str, step: str) -> str:
        """A job's result of one step, kept until the task ends (service/core/kv.py `STEPS`)."""
        return f"{self.task_prefix}{task_id}:{step}"

    @property
    def accepted_prefix(self) -> str:
        """The request hash of an accepted write -> its task id (a replayed request answers the same task)."""
        return f"{self.queue}:idem:"

    def accepted(self, request_hash: str) -> str:
        return self.accepted_prefix + request_hash

    @property
    def pending(self) -> str:
        """The tasks not ended yet, scored by acceptance time (the reaper reads it)."""
        return f"{self.queue}:pending"

    def lease(self, task_id: str) -> str:
        """The worker that runs a task holds this while it does."""
        return f"{self.queue}:lease:{task_id}"

    def user_tasks(self, user_id: str) -> str:
        """A user's newest task ids (the console's Activity)."""
        return f"{self.queue}:utasks:{user_id}"

    def memory_tasks(self, memory_id: str) -> str:
        """The tasks that wrote a memory (an erase finds their records through it)."""
        return f"{self.queue}:mtasks:{memory_id}"

    @property
    def shard_counts(self) -> str:
        """The shard counts jobs were enqueued under (service/tasks/shards.py)."""
        return f"{self.queue}:shard-counts"

    def shard_queue(self, shard: int) -> str:
        """Shard K's ARQ queue when WORKER_SHARDS > 1."""
        return f"{self.queue}:shard:{shard}"

    # ---- small records (service/core/kv.py) ----------------------------------------------------------------------

    def blob(self, name: str) -> str:
        return self.of(f"blob:{name}")

    @property
    def stats(self) -> str:
        return self.of("stats")

    @property
    def loops(self) -> str:
        """Each process's event-loop figures (service/core/loop.py)."""
        return self.of("loops")

    # ---- the write path (service/ledger/) ---------------------------------------------------------------------

    @property
    def outbox(self) -> str:
        return f"{self.queue}:outbox"

    @property
    def outbox_at(self) -> str:
        return f"{self.queue}:outbox:at"

    @property
    def tombstones(self) -> str:
        return f"{self.queue}:tombstones"

    def memory_lock(self, memory_id: str) -> str:
        return f"{self.queue}:mlock:{memory_id}"

    # ---- search, maintenance, auth, the LLM ----------------------------------------------------------------------

    def retrieved(self, user_id: str) -> str:
        """How often search returned each of a user's memories (service/search/usage.py)."""
        return f"{self.queue}:retrieved:{user_id}"

    @property
    def dedup_lock(self) -> str:
        return f"{self.queue}:dedup:lock"

    @property
    def dedup_runs(self) -> str:
        return f"{self.queue}:dedup:runs"

    def dedup_run(self, run_id: str) -> str:
        return f"{self.queue}:dedup:run:{run_id}"

    @property
    def dedup_graph_pending(self) -> str:
        return f"{self.queue}:dedup:graph_pending"

    @property
    def api_key_prefix(self) -> str:
        return f"{self.queue}:apikey:"

    def api_key(self, key_id: str) -> str:
        return self.api_key_prefix + key_id

    def rate(self, kind: str, who: str, window: int) -> str:
        """One caller's requests of a kind in one minute (the rate limit)."""
        return f"{self.queue}:rate:{kind}:{who}:{window}"

    @property
    def llm_modes(self) -> str:
        """The structured-output mode each OpenAI-compatible model accepted (/health)."""
        return f"{self.queue}:llm-modes"


# ---- names inside the deployment, for RedisKV (it adds `<queue>:`) ------------------------------------------------


def idempotency_record(owner: str, key_digest: str) -> str:
    """An Idempotency-Key's stored answer, per caller (service/api/idempotency.py)."""
    return f"idkey:{owner}:{key_digest}"


def run_accepted(user_id: str, run_id: str) -> str:
    """A task run accepted and not yet stored: set and read by the intake, dropped by a delete."""
    return f"run:{user_id}:{run_id}"


def fold_pointer(user_id: str, project_id: str | None, session: str) -> str:
    """The memory a session's raw writes fold into (service/writepath/writes.py)."""
    return f"fold:{user_id}:{project_id or '-'}:{session}"


def reembed_state(embedder: str, user_id: str | None) -> str:
    """One resumable re-embed per target embedder (`name@variant`) and user (or every user: `*`)."""
    return f"reembed:{embedder}:{user_id or '*'}"
