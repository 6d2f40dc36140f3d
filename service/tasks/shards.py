"""User shards: which ARQ queue a job goes to (WORKER_SHARDS; docs/deployment.md "More workers").

A user's jobs all go to one queue, so one worker process sees all of them and its per-user graph writer
(service/ledger/graph_writer.py) coalesces them: two workers never write the same user's graph at once.

The hash is stable across processes, hosts and Python versions (never Python's salted `hash()`):

    shard(user_id) = int.from_bytes(sha256(user_id.encode("utf-8")).digest()[:8], "big") % WORKER_SHARDS

A job without a user (a maintenance run over every user) goes to shard 0, and so do the crons: the workers of
shard 0 schedule them (worker/embedded.py `worker_options`), so they run once per deployment, not once per worker.

Queue names: with WORKER_SHARDS=1 the one queue is ARQ_QUEUE_NAME itself (nothing changes for one machine);
with N > 1, shard K's queue is `<ARQ_QUEUE_NAME>:shard:<K>`. Every shard count the API has enqueued under is
recorded in `<ARQ_QUEUE_NAME>:shard-counts`, so that after a change of WORKER_SHARDS the jobs still waiting on
an old count's queues are moved to their shard's queue under the new count (TaskQueue.rehome, run by the
reconcile tick) and run once.
"""

from __future__ import annotations

import hashlib

from service.core.keys import Keys

NO_USER_SHARD = 0


def shard_of(user_id: str | None, shards: int) -> int:
    """The shard of a user's jobs (0 for a job without a user)."""
    if shards <= 1 or not user_id:
        return NO_USER_SHARD
    digest = hashlib.sha256(user_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % shards


def queue_name(base: str, shard: int, shards: int) -> str:
    """The ARQ queue of shard `shard` out of `shards` (`base`: ARQ_QUEUE_NAME)."""
    if shards <= 1:
        return base
    if not 0 <= shard < shards:
        raise ValueError(f"shard {shard} is not one of 0..{shards - 1} (WORKER_SHARDS={shards})")
    return Keys(base).shard_queue(shard)


def queue_names(base: str, shards: int) -> list[str]:
    """Every queue of a shard count, shard 0 first."""
    return [queue_name(base, k, shards) for k in range(max(1, shards))]


def counts_key(base: str) -> str:
    """The set of the shard counts jobs were enqueued under (the API adds its own at each accept)."""
    return Keys(base).shard_counts


def shards_of_process(index: int, processes: int, shards: int) -> list[int]:
    """The shards worker process `index` of `processes` consumes: k with k mod processes = index, or, with fewer
    shards than processes, shard index mod shards (several processes on one queue)."""
    mine = [k for k in range(shards) if k % processes == index]
    return mine or [index % shards]


def parse_shards(values: list[str], shards: int) -> list[int]:
    """`--shard` values (`3`, `0,1`, or `all`) as sorted shard numbers; ValueError names a wrong one."""
    out: set[int] = set()
    for value in values:
        for part in value.split(","):
            part = part.strip()
            if part == "all":
                out.update(range(shards))
                continue
            if not part.isdigit() or int(part) >= shards:
                raise ValueError(f"--shard {part!r}: WORKER_SHARDS is {shards}, so a shard is one of 0..{shards - 1}")
            out.add(int(part))
    return sorted(out) if out else list(range(shards))
