"""`python -m worker`: the standalone ARQ worker (server profile), with ARQ's CLI options taken from
`worker.WorkerSettings` and the one-script job claim of worker/claiming.py. `--help` prints and exits."""

import argparse

if __name__ == "__main__":
    argparse.ArgumentParser(
        prog="python -m worker",
        description="The memory-platform ARQ worker (server profile: needs QDRANT_URL; the embedded profile runs the "
                    "worker inside `python -m service`). Settings come from the environment and .env (README).",
    ).parse_args()
    from arq.worker import get_kwargs

    from worker import WorkerSettings
    from worker.claiming import ClaimingWorker

    ClaimingWorker(**get_kwargs(WorkerSettings)).run()
