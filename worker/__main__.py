"""`python -m worker`: the standalone ARQ worker (server profile)."""

from arq.worker import run_worker

from worker import WorkerSettings

if __name__ == "__main__":
    run_worker(WorkerSettings)  # type: ignore[arg-type]
