"""`python -m worker`: the standalone ARQ worker (server profile), with ARQ's CLI options taken from
`worker.WorkerSettings` and the one-script job claim of worker/claiming.py."""

from arq.worker import get_kwargs

from worker import WorkerSettings
from worker.claiming import ClaimingWorker

if __name__ == "__main__":
    ClaimingWorker(**get_kwargs(WorkerSettings)).run()
