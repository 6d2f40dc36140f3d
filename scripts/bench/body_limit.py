"""Body limit: an oversized body is refused before it is read or parsed.

    .venv/bin/python scripts/bench/body_limit.py --redis-url redis://127.0.0.1:6379/0 \
        --neo4j-uri bolt://127.0.0.1:7687 [--mb 4] [-n 30]

The same JSON body (`--mb` MB of content in `POST /v1/memories/raw`) is sent `-n` times to two copies of
the app, in this process through httpx's ASGI transport (no network in the way): one with
MAX_BODY_BYTES = 1 MiB (the default; the body is over it: 413 from the middleware, before anything
reads the body) and one with MAX_BODY_BYTES = 2 x the body (the body is read and parsed, then refused by
the content rule: 413 MAX_CONTENT_CHARS). Prints p50/p90 per case and the ratio.

`--smoke` (no other argument needed): the same on the test stack (TEST_REDIS_URL, TEST_NEO4J_URI,
TEST_NEO4J_DATABASE, default "memory") with --mb 1.5 and -n 5, queues of its own; prints `smoke: OK` when both cases
answered 413 and their times are > 0, else `smoke: FAIL` (exit status 1).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.bench.procs import smoke_verdict  # noqa: E402
from service.app import create_app  # noqa: E402
from service.core.settings import Settings  # noqa: E402


async def measure(limit: int, body: bytes, n: int, args: argparse.Namespace, tmp: Path) -> tuple[list[float], int]:
    settings = Settings(_env_file=None, redis_url=args.redis_url, neo4j_uri=args.neo4j_uri,  # type: ignore[call-arg]
                        neo4j_database=args.database, data_dir=tmp, embedder="hash", embedded_worker=False,
                        arq_queue_name=f"bench:body:{limit}{args.queue_suffix}", max_body_bytes=limit,
                        log_level="ERROR", rate_limit_writes_per_minute=0, rate_limit_reads_per_minute=0)
    app = create_app(settings)
    times: list[float] = []
    status = 0
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=60) as client:
            for i in range(n + 3):
                t0 = time.perf_counter()
                resp = await client.post("/v1/memories/raw", content=body, headers={"content-type": "application/json"})
                if i >= 3:  # warm-up
                    times.append((time.perf_counter() - t0) * 1000)
                status = resp.status_code
    return times, status


async def main(args: argparse.Namespace) -> int:
    if not args.smoke:
        return await bench(args)
    try:
        return await bench(args)
    except Exception as exc:  # a store unreachable, the app not starting: the verdict says so
        print(f"error: {type(exc).__name__}: {exc}")
        print("smoke: FAIL")
        return 1


async def bench(args: argparse.Namespace) -> int:
    size = int(args.mb * 1024 * 1024)
    body = json.dumps({"content": "x" * size, "user_id": "bench", "category": "preference"}).encode()
    with tempfile.TemporaryDirectory() as tmp:
        over, over_status = await measure(1024 * 1024, body, args.n, args, Path(tmp) / "a")
        under, under_status = await measure(2 * len(body), body, args.n, args, Path(tmp) / "b")

    def q(xs: list[float], p: float) -> float:
        return statistics.quantiles(xs, n=10)[int(p * 10) - 1] if len(xs) > 1 else xs[0]

    print(f"body {len(body) / 1e6:.1f} MB, {args.n} requests each")
    print(f"{'case':<44} {'status':>6} {'p50 ms':>8} {'p90 ms':>8}")
    print(f"{'over MAX_BODY_BYTES (refused unread)':<44} {over_status:>6} {statistics.median(over):>8.2f} "
          f"{q(over, 0.9):>8.2f}")
    print(f"{'under MAX_BODY_BYTES (read + parsed)':<44} {under_status:>6} {statistics.median(under):>8.2f} "
          f"{q(under, 0.9):>8.2f}")
    print(f"ratio parsed / refused (p50): {statistics.median(under) / statistics.median(over):.1f}x")
    if args.smoke:
        ok = (over_status == 413 and under_status == 413 and len(over) == len(under) == args.n
              and min(over) > 0 and min(under) > 0)
        return smoke_verdict(ok)
    return 0 if over_status == 413 else 1


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    p.add_argument("--neo4j-uri", default="bolt://127.0.0.1:7687")
    p.add_argument("--database", default="memory")
    p.add_argument("--mb", type=float, default=4.0)
    p.add_argument("-n", type=int, default=30)
    p.add_argument("--smoke", action="store_true", help="a short check on the test stack (TEST_* variables): --mb 1.5 "
                                                        "-n 5, then `smoke: OK` or exit 1")
    args = p.parse_args()
    args.queue_suffix = ""
    if args.smoke:
        if not os.environ.get("TEST_REDIS_URL") or not os.environ.get("TEST_NEO4J_URI"):
            p.error("--smoke needs TEST_REDIS_URL and TEST_NEO4J_URI (the test stack)")
        args.redis_url, args.neo4j_uri = os.environ["TEST_REDIS_URL"], os.environ["TEST_NEO4J_URI"]
        args.database = os.environ.get("TEST_NEO4J_DATABASE", "memory")
        args.mb, args.n, args.queue_suffix = 1.5, 5, f":smoke:{uuid.uuid4().hex[:8]}"
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
