"""`python -m worker`: the standalone worker (server profile), one ARQ worker per shard it consumes.

    python -m worker                 every shard's queue (all of them with WORKER_SHARDS=1: the one queue)
    python -m worker --shard 2       shard 2's queue only (WORKER_SHARDS > 1; service/tasks/shards.py)
    python -m worker --shard 0,1     several shards in one process, on one set of clients

Each shard needs at least one worker, and the workers of shard 0 also run the crons. Several workers may consume
the same shard (ARQ hands each job to one); a user's jobs then still run in one of them at a time only if that
shard has one worker. The jobs of a poll are claimed in one script (worker/claiming.py). SIGTERM or SIGINT stops
it: running jobs are cancelled and stay queued, to run again (ARQ's own behaviour on a signal).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import structlog

from service.core.settings import Settings, load_settings
from service.tasks.shards import parse_shards
from worker.embedded import open_deps, serve

log = structlog.get_logger(__name__)


async def run(settings: Settings, shards: list[int]) -> int:
    return await serve(lambda: open_deps(settings), shards, started=lambda worker: log.info(
        "worker_started", shards=shards, worker_shards=settings.redis.worker_shards))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m worker",
        description="The standalone ARQ worker (server profile; needs QDRANT_URL). Settings come from the "
                    "environment and .env, as for the API.")
    parser.add_argument("--shard", action="append", default=[], metavar="K",
                        help="a shard to consume (0..WORKER_SHARDS-1; repeat or separate with commas; 'all'); "
                             "default: every shard")
    args = parser.parse_args(argv)
    settings = load_settings()
    try:
        shards = parse_shards(args.shard, settings.redis.worker_shards)
    except ValueError as exc:
        parser.error(str(exc))
    return asyncio.run(run(settings, shards))


if __name__ == "__main__":
    sys.exit(main())
