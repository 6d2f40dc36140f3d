"""What both fake LLM servers share: per-model scripts, a default responder, the recorded requests, and a uvicorn
server on a free port of 127.0.0.1 in a thread (`with FakeX() as fake:`). Each fake adds its routes and its
wire format."""

from __future__ import annotations

import hashlib
import random
import socket
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Route

ScriptItem = int | str | dict[str, Any]
Responder = Callable[[dict[str, Any], str], dict[str, Any]]
R = TypeVar("R")


def fake_embedding(text: str, dim: int) -> list[float]:
    """Deterministic, not normalised: values in [-3, 3] seeded by the text."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    rng = random.Random(seed)
    return [rng.uniform(-3.0, 3.0) for _ in range(dim)]


def no_facts(_body: dict[str, Any], _model: str) -> dict[str, Any]:
    return {"facts": []}


class ScriptedServer(Generic[R]):
    """The control side and the lifecycle; `requests` holds the fake's own records (type R)."""

    name = "fake"
    host = "127.0.0.1"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scripts: dict[str, deque[ScriptItem]] = defaultdict(deque)
        self._responder: Responder = no_facts
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.requests: list[R] = []
        self.port = 0

    def routes(self) -> list[Route]:
        raise NotImplementedError

    # --- control ------------------------------------------------------------------------

    def script(self, model: str, items: list[ScriptItem]) -> Self:
        """Answers for the next requests to `model`, one per request, before the default."""
        with self._lock:
            self._scripts[model].extend(items)
        return self

    def respond_with(self, responder: Responder | dict[str, Any]) -> Self:
        """The default answer: a payload, or f(request_json, model) -> payload."""
        if isinstance(responder, dict):
            payload = responder
            self._responder = lambda _body, _model: payload
        else:
            self._responder = responder
        return self

    def reset(self) -> None:
        with self._lock:
            self._scripts.clear()
            self.requests.clear()
        self._responder = no_facts

    def pending(self, model: str) -> list[ScriptItem]:
        with self._lock:
            return list(self._scripts[model])

    def _next(self, model: str) -> ScriptItem:
        with self._lock:
            queue = self._scripts.get(model)
            return queue.popleft() if queue else "ok"

    def _put_back(self, model: str, item: ScriptItem) -> None:
        """A scripted item the request did not use answers the next one."""
        with self._lock:
            self._scripts[model].appendleft(item)

    def _keep(self, record: R) -> None:
        with self._lock:
            self.requests.append(record)

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> Self:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(Starlette(routes=self.routes()), log_level="warning", lifespan="off",
                                timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, name=self.name,
                                        daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
