"""Authentication and tenant isolation on every route, limits, Idempotency-Key, nothing leaking.

The route walk reads the app's own route table, so a route added later is covered (401 without a key)
without editing this file; a new route with a body needs an example body below for the 403/404 part.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from scripts.bench.procs import ROOT, cli_env, stack_env, start_service, stop
from service.api.security import PUBLIC_PATHS
from service.app import create_app
from service.core.auth import ApiKeyStore, RateLimiter
from service.core.errors import RateLimited
from service.core.settings import Settings
from service.deps import Deps
from tests.conftest import make_settings, unique
from tests.integration.conftest import running_app

BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/v1/memories"): {"messages": [{"role": "user", "content": "I use Rust."}]},
    ("POST", "/memories/async"): {"messages": [{"role": "user", "content": "I use Rust."}]},
    ("POST", "/v1/memories/raw"): {"content": "I like tea", "category": "preference"},
    ("POST", "/v1/memories/raw/batch"): {"memories": [{"content": "I like tea", "category": "preference"}]},
    ("POST", "/v1/memories/delete"): {"all": True},
    ("PUT", "/v1/memories/{memory_id}"): {"content": "changed"},
    ("POST", "/v1/search"): {"query": "tea"},
    ("POST", "/v1/graph/search"): {"query": "tea"},
    ("POST", "/v1/graph/duplicates/review"): {"source_id": "x", "target_id": "y", "confirm": False},
    ("POST", "/v1/graph/entities/merge"): {"source_id": "x", "target_id": "y"},
    ("POST", "/v1/graph/entities/{entity_id}/unmerge"): {},
    ("POST", "/v1/graph/entities"): {"name": "Acme", "type": "organization"},
    ("POST", "/v1/graph/relations"): {"source": "Alice", "target": "Acme", "predicate": "works_at"},
    ("POST", "/v1/graph/facts"): {"subject": "Alice", "predicate": "lives_in", "object": "Paris"},
    ("POST", "/v1/graph/query"): {"predicate": "works_at"},
    ("POST", "/v1/graph/communities/rebuild"): {},
    ("POST", "/v1/maintenance/dedup"): {"dry_run": True},
    ("POST", "/v1/maintenance/reconcile"): {"dry_run": True},
    ("POST", "/v1/runs"): {"task": "fix the build"},
    ("POST", "/v1/runs/search"): {"query": "build"},
    ("POST", "/v1/conversations/search"): {"query": "plan"},
    ("POST", "/v1/runs/{run_id}/steps"): {"seq": 0, "action": "look"},
    ("POST", "/v1/runs/{run_id}/steps/{seq}/tool-calls"): {"tool": "Bash", "arguments": {"command": "make"}},
    ("POST", "/v1/runs/{run_id}/complete"): {"success": True, "summary": "done"},
}


class Stack:
    def __init__(self, client: httpx.AsyncClient, deps: Deps, keys: dict[str, str], users: dict[str, str]) -> None:
        self.client = client
        self.deps = deps
        self.keys = keys
        self.users = users

    def h(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[who]}"}


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    async with running_app(tmp_path_factory.mktemp("auth"), auth_mode="keys", rate_limit_reads_per_minute=0,
                           rate_limit_writes_per_minute=0) as (client, deps):
        store = ApiKeyStore(deps.redis, deps.settings.redis)
        users = {"a": unique("ua"), "b": unique("ub")}
        keys = {
            "a": (await store.create(users["a"], "test a"))[1],
            "b": (await store.create(users["b"], "test b"))[1],
            "admin": (await store.create("ops", "test admin", admin=True))[1],
        }
        yield Stack(client, deps, keys, users)


def _fill(path: str, ids: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: ids.get(m.group(1), "0" if m.group(1) == "seq" else "p1"), path)


async def test_every_route_needs_a_key_and_sees_only_its_tenant(stack: Stack) -> None:
    c, b = stack.client, stack.users["b"]
    # B's memory, task and run, made by B's own key
    resp = await c.post("/v1/memories/raw", json={"content": "B's secret tea", "category": "preference"},
                        headers=stack.h("b"))
    done = await _wait(c, resp.json()["task_id"], stack.h("b"))
    assert done["status"] == "completed", done
    run = await c.post("/v1/maintenance/reconcile", json={"user_id": b, "dry_run": True}, headers=stack.h("admin"))
    assert run.status_code == 202
    traced = await c.post("/v1/search", json={"query": "tea", "trace": True}, headers=stack.h("b"))
    assert traced.status_code == 200 and traced.json()["trace_id"]
    ids = {"memory_id": done["result"]["memories"][0]["id"], "task_id": resp.json()["task_id"],
           "run_id": run.json()["run_id"], "project_id": "p1", "trace_id": traced.json()["trace_id"]}
    await _trace_written(c, ids["trace_id"], stack.h("b"))

    # the app's own route table, as its OpenAPI publishes it (full paths, parameters and bodies)
    schema = c._transport.app.openapi()  # type: ignore[attr-defined]
    checked = 0
    for path, ops in schema["paths"].items():
        if path in PUBLIC_PATHS:
            continue
        for method, op in ((m.upper(), o) for m, o in ops.items()):
            url = _fill(path, ids)
            body = BODIES.get((method, path))
            query_user = any(p["name"] == "user_id" and p["in"] == "query" for p in op.get("parameters", []))
            has_body = "requestBody" in op
            # 1. no key: 401 on every guarded route
            anon = await c.request(method, url, json=body)
            assert anon.status_code == 401, (method, path, anon.text)
            assert anon.headers.get("www-authenticate") == "Bearer"
            # 2. A's key naming B: 403 (maintenance writes: 403 for a user key anyway)
            if path == "/v1/import":  # the body is an export file; its header names the user
                header = {"type": "header", "format": "memory-export", "version": 1, "user_id": b}
                resp = await c.post(url, content=json.dumps(header).encode() + b"\n", headers=stack.h("a"))
                assert resp.status_code == 403, (method, path, resp.status_code, resp.text)
            elif query_user or has_body:
                params = {"user_id": b} if query_user else None
                named = {**(body or {}), "user_id": b} if has_body else None
                resp = await c.request(method, url, params=params, json=named, headers=stack.h("a"))
                assert resp.status_code == 403, (method, path, resp.status_code, resp.text)
            # 3. A's key on B's ids, naming nobody: 404, never 403 (other tenants' ids are not confirmed)
            if re.search(r"\{(memory_id|task_id|run_id|trace_id|session_id)\}", path):
                resp = await c.request(method, url, json=body, headers=stack.h("a"))
                assert resp.status_code == 404, (method, path, resp.status_code, resp.text)
            checked += 1
    assert checked >= 18
    # B still sees its own
    assert (await c.get(f"/v1/memories/{ids['memory_id']}", headers=stack.h("b"))).status_code == 200
    assert (await c.get(f"/v1/maintenance/runs/{ids['run_id']}", headers=stack.h("b"))).status_code == 200
    runs_a = (await c.get("/v1/maintenance/runs", headers=stack.h("a"))).json()["items"]
    assert all(r["user_id"] == stack.users["a"] for r in runs_a)
    # maintenance writes need an admin key
    assert (await c.post("/v1/maintenance/dedup", json={}, headers=stack.h("b"))).status_code == 403
    assert (await c.post("/v1/maintenance/optimize", headers=stack.h("b"))).status_code == 403


async def test_runs_and_conversations_of_another_user_are_404(stack: Stack) -> None:
    """the tiers: B's own run and session, by B's key; A's key sees neither, and naming B is 403."""
    c, b = stack.client, stack.users["b"]
    run = await c.post("/v1/runs", json={"task": "B's secret deploy", "steps": [{"seq": 0, "action": "deploy"}]},
                       headers=stack.h("b"))
    assert (await _wait(c, run.json()["task_id"], stack.h("b")))["status"] == "completed"
    conv = await c.post("/v1/memories", json={"session_id": "b-session",
                                              "messages": [{"role": "user", "content": "B's secret plan"}]},
                        headers=stack.h("b"))
    assert (await _wait(c, conv.json()["task_id"], stack.h("b")))["status"] == "completed"
    run_id = run.json()["run_id"]
    assert (await c.get(f"/v1/runs/{run_id}", headers=stack.h("b"))).status_code == 200
    assert (await c.get("/v1/conversations/b-session", headers=stack.h("b"))).status_code == 200
    for method, url, body in (
        ("GET", f"/v1/runs/{run_id}", None), ("DELETE", f"/v1/runs/{run_id}", None),
        ("POST", f"/v1/runs/{run_id}/steps", {"seq": 1, "action": "x"}),
        ("POST", f"/v1/runs/{run_id}/steps/0/tool-calls", {"tool": "Bash"}),
        ("POST", f"/v1/runs/{run_id}/complete", {"success": True}),
        ("GET", "/v1/conversations/b-session", None), ("GET", "/v1/conversations/b-session/summary", None),
        ("DELETE", "/v1/conversations/b-session", None),
    ):
        resp = await c.request(method, url, json=body, headers=stack.h("a"))
        assert resp.status_code == 404, (method, url, resp.status_code, resp.text)
    found = await c.post("/v1/runs/search", json={"query": "secret deploy"}, headers=stack.h("a"))
    assert found.status_code == 200 and found.json()["results"] == [], found.text
    assert (await c.get("/v1/runs", headers=stack.h("a"))).json()["items"] == []
    assert (await c.get("/v1/conversations", headers=stack.h("a"))).json()["items"] == []
    hits = await c.post("/v1/conversations/search", json={"query": "secret plan"}, headers=stack.h("a"))
    assert hits.status_code == 200 and hits.json()["results"] == []
    assert (await c.get("/v1/runs/stats", headers=stack.h("a"))).json()["runs"] == 0
    assert (await c.get("/v1/runs", params={"user_id": b}, headers=stack.h("a"))).status_code == 403
    assert (await c.get(f"/v1/runs/{run_id}", params={"user_id": b}, headers=stack.h("admin"))).status_code == 200


async def test_user_key_acts_for_its_user_without_naming_it_and_admin_for_any(stack: Stack) -> None:
    c = stack.client
    mine = await c.post("/v1/memories/raw", json={"content": "A drinks green tea", "category": "preference"},
                        headers=stack.h("a"))
    assert mine.status_code == 202
    assert (await _wait(c, mine.json()["task_id"], stack.h("a")))["status"] == "completed"
    found = (await c.post("/v1/search", json={"query": "green tea"}, headers=stack.h("a"))).json()["results"]
    assert [r["content"] for r in found] == ["A drinks green tea"]
    # an admin key acts for whichever user it names, and must name one
    pages = {who: await c.get("/v1/memories", params={"user_id": stack.users[who]}, headers=stack.h("admin"))
             for who in ("a", "b")}
    assert {p.status_code for p in pages.values()} == {200}
    assert "A drinks green tea" in [m["content"] for m in pages["a"].json()["memories"]]
    assert "A drinks green tea" not in [m["content"] for m in pages["b"].json()["memories"]]
    unnamed = await c.get("/v1/memories", headers=stack.h("admin"))  # a missing field is 422 like any schema error
    assert unnamed.status_code == 422 and unnamed.json()["code"] == "validation_error"
    assert unnamed.json()["errors"][0]["loc"] == ["user_id"] and "user_id is required" in unnamed.json()["detail"]
    # X-API-Key works too
    assert (await c.get("/v1/memories", headers={"X-API-Key": stack.keys["a"]})).status_code == 200


async def test_revoked_and_malformed_keys_are_refused(stack: Stack) -> None:
    store = ApiKeyStore(stack.deps.redis, stack.deps.settings.redis)
    record, key = await store.create(stack.users["a"], "to revoke")
    headers = {"Authorization": f"Bearer {key}"}
    assert (await stack.client.get("/v1/memories", headers=headers)).status_code == 200
    await store.revoke(record.key_id)
    refused = await stack.client.get("/v1/memories", headers=headers)
    assert refused.status_code == 401 and "revoked" in refused.json()["detail"]
    for bad in ("nope", f"msk_{record.key_id}_wrongsecretwrongsecret", "msk_ffffffffffff_" + "x" * 40):
        assert (await stack.client.get("/v1/memories", headers={"X-API-Key": bad})).status_code == 401
    assert all(k.secret_sha256 != key for k in await store.list(stack.users["a"]))  # only hashes are kept


async def test_idempotency_key_returns_the_first_task_and_refuses_another_body(stack: Stack) -> None:
    c = stack.client
    key = {"Idempotency-Key": unique("idem"), **stack.h("a")}
    body = {"content": f"idempotent fact {unique('x')}", "category": "preference"}
    first = await c.post("/v1/memories/raw", json=body, headers=key)
    again = await c.post("/v1/memories/raw", json=body, headers=key)
    assert first.status_code == again.status_code == 202
    assert first.json()["task_id"] == again.json()["task_id"]
    other = await c.post("/v1/memories/raw", json={**body, "content": "something else"}, headers=key)
    assert other.status_code == 422 and other.json()["code"] == "idempotency_key_reused"
    assert "Idempotency-Key" in other.json()["errors"][0]["msg"] and "Idempotency-Key" in other.json()["detail"]
    # keys belong to their caller: B's request with the same key is its own
    theirs = await c.post("/v1/memories/raw", json={**body, "content": "B's own"},
                          headers={"Idempotency-Key": key["Idempotency-Key"], **stack.h("b")})
    assert theirs.status_code == 202 and theirs.json()["task_id"] != first.json()["task_id"]


async def test_body_limit_rate_limit_and_host_check(tmp_path: Path) -> None:
    async with running_app(tmp_path, max_body_bytes=2048, rate_limit_reads_per_minute=3,
                           rate_limit_writes_per_minute=0) as (c, _):
        user = unique("lim")
        big = {"content": "x" * 5000, "user_id": user, "category": "preference"}
        resp = await c.post("/v1/memories/raw", json=big)
        assert resp.status_code == 413 and "MAX_BODY_BYTES" in resp.text

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(10):
                yield b"x" * 1000

        streamed = await c.post("/v1/memories/raw", content=chunks(), headers={"content-type": "application/json"})
        assert streamed.status_code == 413  # no Content-Length: cut off while it streams in
        codes = [(await c.get("/v1/memories", params={"user_id": user})).status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        limited = await c.get("/v1/memories", params={"user_id": user})
        assert limited.status_code == 429 and 1 <= int(limited.headers["retry-after"]) <= 61
        # writes are counted apart from reads (and are unlimited here)
        ok = await c.post("/v1/memories/raw", json={"content": "small", "user_id": user, "category": "preference"})
        assert ok.status_code == 202
        # DNS rebinding: a Host header the API does not serve is refused
        evil = await c.get("/health", headers={"host": "attacker.example"})
        assert evil.status_code == 400 and evil.json()["code"] == "invalid_host"  # the one error body


async def test_rate_limit_counts_in_chunks_and_never_lets_more_through(stack: Stack) -> None:
    """Two processes' limiters on one Redis: together they let exactly the limit through in a window, and Redis
    sees one round trip per chunk (its counter moves by the chunk)."""
    deps, limit, who = stack.deps, 1000, unique("ip:bucket")
    chunk = RateLimiter.chunk_for(limit)
    assert chunk > 1
    if 60 - time.time() % 60 < 10:  # all of it in one window
        await asyncio.sleep(60 - time.time() % 60 + 0.1)
    window = int(time.time() // 60)
    counter = f"{deps.settings.redis.queue_name}:rate:writes:{who}:{window}"
    first, second = RateLimiter(), RateLimiter()
    allowed, refused = 0, 0
    for i in range(limit + 3 * chunk):
        try:
            await (first if i % 3 else second).check(deps, "writes", who, limit)
            allowed += 1
        except RateLimited as exc:
            refused += 1
            assert 1 <= exc.retry_after <= 61
        if i == 0:
            assert int(await deps.redis.get(counter)) == chunk  # one round trip reserved a chunk
    assert int(time.time() // 60) == window
    assert (allowed, refused) == (limit, 3 * chunk)
    assert int(await deps.redis.get(counter)) % chunk == 0  # reserved in chunks, never one by one


def test_refuses_to_start_on_a_public_host_without_keys(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, host="0.0.0.0", auth_mode="none")
    with pytest.raises(SystemExit, match="AUTH_MODE=none"):
        create_app(settings)
    assert Settings(_env_file=None, host="0.0.0.0").resolved_auth_mode == "keys"  # type: ignore[call-arg]
    assert Settings(_env_file=None).resolved_auth_mode == "none"  # type: ignore[call-arg]


async def test_secrets_never_leak_through_health_or_errors(tmp_path: Path) -> None:
    url = "redis://:hunter2-secret@127.0.0.1:1/0"  # nothing listens there
    settings = make_settings(tmp_path, redis_url=url)
    with pytest.raises(Exception) as info:  # the app cannot start without Redis: the message is masked
        async with running_app(tmp_path, redis_url=url):
            pass
    assert "hunter2" not in str(info.value) and "***" in str(info.value)
    assert "hunter2" not in settings.redis.safe_url


async def test_keys_cli_and_mcp_http_transport_need_a_key(tmp_path: Path) -> None:
    queue = unique("test:authq")
    env = stack_env(tmp_path / "data", queue, AUTH_MODE="keys", MCP_TRANSPORT="http")
    cli = cli_env(env)
    created = subprocess.run([sys.executable, "-m", "service", "keys", "create", "--user", "cli-user", "--name", "t"],
                             cwd=ROOT, env=cli, capture_output=True, text=True, timeout=60)
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip().splitlines()[-1]
    assert key.startswith("msk_")
    listed = subprocess.run([sys.executable, "-m", "service", "keys", "list", "--user", "cli-user"],
                            cwd=ROOT, env=cli, capture_output=True, text=True, timeout=60)
    assert key.split("_")[1] in listed.stdout and key.split("_", 2)[2] not in listed.stdout
    proc, port = start_service(env, tmp_path / "service.log")
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": "t", "version": "0"}}}
            hdrs = {"Accept": "application/json, text/event-stream"}
            assert (await c.post("/mcp/", json=init, headers=hdrs)).status_code == 401
            ok = await c.post("/mcp/", json=init, headers={**hdrs, "Authorization": f"Bearer {key}"})
            assert ok.status_code == 200, ok.text
            # the tools act for the key's user: naming another user is refused like on the REST API
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "recall_memories", "arguments": {"query": "tea", "user_id": "someone-else"}}}
            other = (await c.post("/mcp/", json=call, headers={**hdrs, "Authorization": f"Bearer {key}"})).json()
            assert other["result"]["isError"] and "another user_id" in other["result"]["content"][0]["text"]
            call["params"]["arguments"]["user_id"] = "cli-user"  # type: ignore[index]
            own = (await c.post("/mcp/", json=call, headers={**hdrs, "Authorization": f"Bearer {key}"})).json()
            assert not own["result"]["isError"], own
            assert (await c.get("/v1/memories", headers={"Authorization": f"Bearer {key}"})).status_code == 200
            revoked = subprocess.run([sys.executable, "-m", "service", "keys", "revoke", key.split("_")[1]],
                                     cwd=ROOT, env=cli, capture_output=True, text=True, timeout=60)
            assert revoked.returncode == 0, revoked.stderr
            assert (await c.get("/v1/memories", headers={"Authorization": f"Bearer {key}"})).status_code == 401
    finally:
        stop(proc)


async def _wait(c: httpx.AsyncClient, task_id: str, headers: dict[str, str]) -> dict[str, Any]:
    for _ in range(400):
        body: dict[str, Any] = (await c.get(f"/v1/memories/status/{task_id}", headers=headers)).json()
        if body["status"] in ("completed", "failed"):
            return body
        await asyncio.sleep(0.05)
    raise AssertionError(f"task {task_id} did not end")


async def _trace_written(c: httpx.AsyncClient, trace_id: str, headers: dict[str, str]) -> None:
    """Traces are written after the search answers: wait until it can be read (bounded)."""
    for _ in range(200):
        if (await c.get(f"/v1/traces/{trace_id}", headers=headers)).status_code == 200:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"trace {trace_id} was not written")
