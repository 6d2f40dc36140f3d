"""A minimal HTTP client of the REST API, with hard time bounds.

Standard library only (`http.client`): see `settings.py` for why not httpx.

- `request()` makes one request and gives up at a deadline: the request runs in a daemon thread that
  the caller waits for at most `timeout` seconds, so neither a refused connection, a server that
  accepts and never answers, nor one that drips its answer byte by byte can hold the caller longer.
  Socket operations also carry the remaining time as their timeout, so the abandoned thread ends soon
  after. Any failure is None, never an exception.
- `fire_and_forget()` sends a write without waiting for it. Where `os.fork` exists (Linux, macOS) the
  hook process forks: the child detaches (`setsid`, stdin/stdout/stderr to /dev/null, so Claude Code,
  which waits for the hook's pipes to close, is not held by it), sends the request with
  `SEND_TIMEOUT` seconds to get an answer, and exits with `os._exit`; the parent returns at once.
  Without fork (Windows) the request is sent in-process with `SYNC_SEND_TIMEOUT` seconds, enough for
  a service on 127.0.0.1 and within post-tool-use's 300 ms.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote, urlencode, urlsplit

from service.hooks.settings import HookSettings

SEND_TIMEOUT = 3.0
SYNC_SEND_TIMEOUT = 0.2
MAX_BODY = 256 * 1024  # bytes of an answer we read at most
USER_AGENT = "memory-hooks/0.1"

T = TypeVar("T")


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def within(seconds: float, fn: Callable[[], T]) -> T | None:
    """fn() in a daemon thread; its result if it finished within `seconds`, else None."""
    box: list[T] = []

    def run() -> None:
        with contextlib.suppress(Exception):  # a failed request is a None answer, by design
            box.append(fn())

    worker = threading.Thread(target=run, name="memory-hooks-request", daemon=True)
    worker.start()
    worker.join(max(0.0, seconds))
    return box[0] if box else None


def build_url(base: str, path: str, query: Mapping[str, str | int] | None = None) -> str:
    url = base.rstrip("/") + path
    if query:
        url += "?" + urlencode(dict(query))
    return url


def path_segment(value: str) -> str:
    return quote(value, safe="")


def _send(
    settings: HookSettings, method: str, url: str, body: bytes | None, deadline: float
) -> Response:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"unsupported MEMORY_URL {settings.url!r}")

    def remaining() -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("deadline passed")
        return left

    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname, parts.port, timeout=remaining())
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json, text/markdown", "Connection": "close"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    if settings.api_key:
        headers["Authorization"] = f"Bearer {settings.api_key}"
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    try:
        conn.request(method, target, body=body, headers=headers)
        if conn.sock is not None:
            conn.sock.settimeout(remaining())
        resp = conn.getresponse()
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_BODY:
            if conn.sock is not None:
                conn.sock.settimeout(remaining())
            chunk = resp.read(min(65536, MAX_BODY + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return Response(resp.status, b"".join(chunks)[:MAX_BODY])
    finally:
        conn.close()


def request(
    settings: HookSettings,
    method: str,
    path: str,
    *,
    query: Mapping[str, str | int] | None = None,
    json_body: Any = None,
    timeout: float,
) -> Response | None:
    """One request to the API; None on any failure or when `timeout` seconds pass first."""
    url = build_url(settings.url, path, query)
    body = None if json_body is None else json.dumps(json_body, ensure_ascii=False).encode("utf-8")
    deadline = time.monotonic() + timeout
    return within(timeout, lambda: _send(settings, method, url, body, deadline))


def _detach() -> None:
    with contextlib.suppress(OSError):
        os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if devnull > 2:
        os.close(devnull)


def detached(send: Callable[[float], object]) -> str:
    """Run `send(deadline)` without waiting for it; returns "forked" or "sync".

    `deadline` is a `time.monotonic()` value: SEND_TIMEOUT seconds away in a forked, detached child, or
    SYNC_SEND_TIMEOUT seconds away in-process where there is no fork."""
    fork: Callable[[], int] | None = getattr(os, "fork", None)
    if fork is not None:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        try:
            pid = fork()
        except OSError:
            pid = -1
        if pid == 0:  # the child: detach, send, leave without running the parent's exit handlers
            try:
                _detach()
                send(time.monotonic() + SEND_TIMEOUT)
            finally:
                os._exit(0)
        if pid > 0:
            return "forked"
    with contextlib.suppress(Exception):  # a hook never fails
        send(time.monotonic() + SYNC_SEND_TIMEOUT)
    return "sync"


def fire_and_forget(settings: HookSettings, path: str, json_body: Any) -> str:
    """POST `json_body` to `path` without waiting for the answer; returns "forked" or "sync"."""
    return detached(lambda deadline: request(settings, "POST", path, json_body=json_body,
                                             timeout=deadline - time.monotonic()))
