"""A typed Python client of the memory API: `MemoryClient` (sync) and `AsyncMemoryClient` (async), docs/client.md.

    from service.client import MemoryClient
    with MemoryClient("http://127.0.0.1:8199", api_key=None) as mem:
        mem.add("I prefer tabs", category="preference", user_id="me").wait()
        hits = mem.search("indentation", user_id="me").results

- Every route is one `Call` built by `Routes` (its method, path, query, body and answer model): the one definition
  both clients send. Each client has a method per route (`mem.search(...)`, `await amem.search(...)`) and `send`.
- Answers are the API's pydantic models (service/schemas); a write answers `Accepted`, whose `wait()` follows the
  task to its end (`/v1/tasks/{id}`) and returns its status, with a typed `result` (`result.memories[0].id`).
- `get`, `update` and `delete` take a full memory id or a short one (any unique prefix, as search and the CLI
  print it); a prefix of several ids raises `AmbiguousId` listing them.
- Transport errors and 503 are retried (RETRIES times, backoff) with the same `Idempotency-Key`: every
  state-changing call carries one (a fresh one per call unless given), so a write retried after a dropped
  connection is stored once.
- Modules: call.py (`Call`, `ApiError`, the retry rules), routes.py (`Routes`), sync.py (`MemoryClient`), aio.py
  (`AsyncMemoryClient`); import them from `service.client`.
- Every error answer is raised as `ApiError` with `status`, `code`, `detail` (and `errors` of a 422); a server
  that cannot be reached is `ApiError` with status 0 and code `unreachable`.
"""

from service.client.aio import AsyncAccepted, AsyncMemoryClient
from service.client.call import AmbiguousId, ApiError, Call, TaskFailed
from service.client.routes import Routes
from service.client.sync import Accepted, MemoryClient

__all__ = ["Accepted", "AmbiguousId", "ApiError", "AsyncAccepted", "AsyncMemoryClient", "Call", "MemoryClient",
           "Routes", "TaskFailed"]
