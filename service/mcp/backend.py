"""The two backends that run an MCP tool's operation (service/mcp/operations.py).

`ServiceBackend` runs `Operation.local` in the API process (the HTTP transport, mounted in the API), on the read
side's parts (`MemoryReads`, `MemorySearch`, `Curation`, `GraphReads`) or the intake, for the caller the MCP
request's API key authenticated. `ApiBackend` sends the operation's REST request (the stdio server: a separate
process that must not open the embedded Qdrant shard the API owns). Neither holds any logic of its own:
validation, scope rules, queueing and search live in the service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from service.client.aio import AsyncMemoryClient
from service.client.call import ApiError as ClientError
from service.client.call import Call
from service.core.errors import DependencyUnavailable, ServiceError
from service.core.sensitivity import reset_current, set_current
from service.mcp.operations import Local, Operation, Req, Resp

if TYPE_CHECKING:
    from service.core.auth import Caller
    from service.deps import Deps


class ServiceBackend:
    """In the API process: the very objects the REST routes use, for the caller that the MCP request's API key
    authenticated (the same tenant rules as the REST routes)."""

    def __init__(self, deps: Deps, caller: Caller) -> None:
        self._on = Local(deps.memories, deps.search, deps.curation, deps.graph_reads, deps.intake, caller, deps.runs,
                         deps.run_intake, deps.graph_intake, deps.graph_facts)

    async def call(self, op: Operation[Req, Resp], req: Req) -> Resp:
        # the key's sensitivity ceiling (lowered by a tool's own max_sensitivity) for every read the tool makes
        token = set_current(self._on.caller.ceiling(getattr(req, "max_sensitivity", None)))
        try:
            return await op.local(self._on, req)
        finally:
            reset_current(token)


class RefusedByApi(ServiceError):
    """The API refused a request (4xx) or failed (5xx); the message is its `detail`."""

    def __init__(self, status_code: int, detail: str, code: str = "") -> None:
        super().__init__(detail)
        self.status_code = status_code
        self.error_code = code or None


class ApiBackend:
    """In `python -m service.mcp`: each operation is one request to its REST route, sent by the typed client
    (service/client.py: retries of transport errors and 503 with one Idempotency-Key per write)."""

    def __init__(self, base_url: str, timeout_s: float = 30.0, api_key: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = AsyncMemoryClient(self.base_url, api_key, timeout=timeout_s)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def call(self, op: Operation[Req, Resp], req: Req) -> Resp:
        route, path, fields = op.route(req)
        query = route.method == "GET"
        call: Call[Resp] = Call(route.method, path, op.response, params=fields if query else {},
                                body=None if query else fields, writes=route.writes)
        try:
            return await self._client.send(call)
        except ClientError as exc:
            if exc.status == 0:
                raise DependencyUnavailable(exc.detail) from exc
            detail = exc.detail if exc.status < 500 else f"memory API error {exc.status}: {exc.detail}"
            raise RefusedByApi(exc.status, detail, exc.code) from exc
