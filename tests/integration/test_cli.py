"""The operator commands of `python -m service` against a running service, and with the API down."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx

from scripts.bench.procs import ROOT, cli_env, free_port, stack_env, start_service, stop
from tests.conftest import MODEL_CACHE, unique


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_operator_commands_drive_the_running_api(tmp_path: Path) -> None:
    env = stack_env(tmp_path / "data", unique("test:cliq"), DEDUP_CRON_ENABLED="false")
    proc, port = start_service(env, tmp_path / "service.log")
    cli = cli_env({**env, "MEMORY_API_URL": f"http://127.0.0.1:{port}"}, drop=("REDIS_", "ARQ_", "MEMORY_"))
    user = unique("cli")
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            task = c.post("/v1/memories/raw", json={"content": "I use Ansible", "user_id": user,
                                                    "category": "technical_skill"}).json()["task_id"]
            for _ in range(300):  # bounded: 30 s (the worker child may still be starting)
                if c.get(f"/v1/memories/status/{task}").json()["status"] == "completed":
                    break
                time.sleep(0.1)
            assert c.get(f"/v1/memories/status/{task}").json()["status"] == "completed"
        stats = _cli(cli, "stats", "--user", user, "--json")
        assert stats.returncode == 0, stats.stderr
        report = json.loads(stats.stdout)
        assert report["status"] == "ok" and report["user"] == {"user_id": user, "memories": 1}
        readable = _cli(cli, "stats", "--user", user)  # for a person by default: lines, no JSON, no dict
        assert readable.returncode == 0, readable.stderr
        assert readable.stdout.splitlines()[0].split() == ["status", "ok"]
        assert "redis ok" in readable.stdout and f"{user}: 1 memories" in readable.stdout
        assert "{" not in readable.stdout
        dedup = _cli(cli, "dedup", "run", "--user", user, "--dry-run")
        assert dedup.returncode == 0, dedup.stderr
        assert "dedup run" in dedup.stdout and "completed" in dedup.stdout and "scanned 1" in dedup.stdout
        rec = _cli(cli, "reconcile", "--user", user, "--dry-run")
        assert rec.returncode == 0, rec.stderr
        assert "reconcile run" in rec.stdout and "completed" in rec.stdout
        opt = _cli(cli, "optimize")  # Qdrant Edge: a copy is optimized in a child process and swapped in
        assert opt.returncode == 0, opt.stderr
        built = json.loads(opt.stdout)
        # a task now: the worker child builds it through the API process's shard
        assert built["backend"].startswith("qdrant-edge") and built["backlog_after"] <= built["backlog_before"]
        assert built["figures"]["points"] >= 1 and built["figures"]["swap_pause_ms"] >= 0
        dump = tmp_path / "export.ndjson.gz"
        exported = _cli(cli, "export", "--user", user, "--vectors", "-o", str(dump))
        assert exported.returncode == 0, exported.stderr
        assert "exported 1 memories" in exported.stderr
        lines = [json.loads(x) for x in gzip.decompress(dump.read_bytes()).splitlines()]
        assert lines[0]["type"] == "header" and lines[-1]["counts"]["memories"] == 1
        assert [x["memory"]["content"] for x in lines if x["type"] == "memory"] == ["I use Ansible"]
        imported = _cli(cli, "import", str(dump), "--json")
        assert imported.returncode == 0, imported.stderr
        result = json.loads(imported.stdout)
        assert result["imported"]["memories"] == 1 and result["rejected"] == []
        told = _cli(cli, "import", str(dump))
        assert told.returncode == 0, told.stderr
        assert told.stdout.startswith("imported 1 memories, ") and "rejected: 0 line(s)" in told.stdout
        assert "{" not in told.stdout
        missing = _cli(cli, "import", str(tmp_path / "nope.ndjson"))
        assert missing.returncode == 1 and "cannot read" in missing.stderr
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            recent = c.get("/v1/maintenance/runs", params={"limit": 5}).json()["items"]
        for run in recent:  # every finished run says how far it got: all of it
            assert run["progress"]["done"] == run["progress"]["total"] >= 1, run
        listed = _cli(cli, "dedup", "runs", "--limit", "5")
        assert listed.returncode == 0 and "reconcile run" in listed.stdout and "dedup run" in listed.stdout
        reembedded = _cli(cli, "reembed", "--user", user)
        assert reembedded.returncode == 0, reembedded.stderr
        done = json.loads(reembedded.stdout)
        assert (done["finished"], done["reembedded"], done["total"], done["user_id"]) == (True, 1, 1, user)
    finally:
        stop(proc)
    # The store is the hash embedder's: another model of its dimension is refused with one line naming the fix.
    refused = subprocess.run([sys.executable, "-m", "service"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                             env={**cli_env(env, drop=("REDIS_", "NEO4J_", "QDRANT_", "ARQ_")), "HOST": "127.0.0.1",
                                  "PORT": str(free_port()), "EMBEDDER": "local", "MODEL_CACHE_DIR": str(MODEL_CACHE)})
    assert refused.returncode == 1, refused.stderr[-2000:]
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("error: vector collection") and "python -m service reembed" in last, last
    assert "Traceback" not in refused.stderr, refused.stderr[-3000:]
    down = {**cli, "MEMORY_API_URL": f"http://127.0.0.1:{free_port()}"}
    for args in (("stats",), ("dedup", "runs"), ("dedup", "run"), ("reconcile",), ("optimize",),
                 ("export", "--user", "u1", "-o", str(tmp_path / "x.ndjson")), ("import", str(dump))):
        out = _cli(down, *args)
        assert out.returncode == 3 and "not reachable" in out.stderr, (args, out.stderr)  # the exit-code rule


def test_ids_by_unique_prefix_scope_on_add(tmp_path: Path) -> None:
    """`search` prints 8 characters of each id: `get` and `delete` take them (any unique prefix); a prefix of several
    ids is refused with the candidates; `add --scope global` stores a project category about the person."""
    env = stack_env(tmp_path / "data", unique("test:cliq"), DEDUP_CRON_ENABLED="false")
    proc, port = start_service(env, tmp_path / "service.log")
    cli = cli_env({**env, "MEMORY_API_URL": f"http://127.0.0.1:{port}"}, drop=("REDIS_", "ARQ_", "MEMORY_"))
    user = unique("cli-prefix")
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            facts = [{"content": f"I keep note number {i} in the blue notebook", "category": "personal_fact"}
                     for i in range(20)]
            task = c.post("/v1/memories/raw/batch", json={"user_id": user, "memories": facts}).json()["task_id"]
            for _ in range(300):  # bounded: 30 s (the worker child may still be starting)
                done = c.get(f"/v1/tasks/{task}").json()
                if done["status"] == "completed":
                    break
                time.sleep(0.1)
        ids = [m["id"] for m in done["result"]["memories"]]
        assert len(ids) == 20
        added = _cli(cli, "add", "I keep the red notebook for drafts", "--category", "personal_fact", "--user", user,
                     "--wait", "--json")
        assert added.returncode == 0, added.stderr
        later = json.loads(added.stdout)["result"]["memories"][0]["id"]
        for order, expected in ((None, [later, *sorted(ids)[:3]]), ("oldest", sorted(ids)[:4])):
            listed = _cli(cli, "list", "--user", user, "--limit", "4", "--json", *(("--order", order) if order else ()))
            assert listed.returncode == 0, listed.stderr
            assert [m["id"] for m in json.loads(listed.stdout)["memories"]] == expected  # the batch: one time, by id
        content = {m["id"]: m["content"] for m in done["result"]["memories"]}
        short = ids[0][:8]
        got = _cli(cli, "get", short, "--user", user, "--json")
        assert got.returncode == 0, got.stderr
        assert (json.loads(got.stdout)["id"], json.loads(got.stdout)["content"]) == (ids[0], content[ids[0]])
        # 21 ids (the batch and the later one) over 16 first digits: some share one; that digit names all of them,
        # and the error lists them
        every = [*ids, later]
        first = [i[0] for i in every]
        shared = next(d for d in "0123456789abcdef" if first.count(d) >= 2)
        named = sorted(i for i in every if i[0] == shared)
        ambiguous = _cli(cli, "get", shared, "--user", user)
        assert ambiguous.returncode == 2, ambiguous.stderr
        assert f"'{shared}' is the start of {len(named)} memory ids" in ambiguous.stderr
        assert all(i in ambiguous.stderr for i in named)
        unused = next(p for p in (f"{a}{b}" for a in "0123456789abcdef" for b in "0123456789abcdef")
                      if not any(i.startswith(p) for i in every))
        none = _cli(cli, "get", unused, "--user", user)
        assert none.returncode == 1 and f"no memory id starts with '{unused}'" in none.stderr
        deleted = _cli(cli, "delete", ids[1][:8], "--user", user, "--yes", "--json")
        assert deleted.returncode == 0, deleted.stderr
        assert json.loads(deleted.stdout)[0]["status"] == "completed"
        assert _cli(cli, "get", ids[1], "--user", user).returncode == 1  # gone: 404
        # --scope: a project category stored about the person, everywhere
        refused = _cli(cli, "add", "I use Kubernetes", "--category", "tech_stack", "--user", user, "--wait")
        assert refused.returncode == 1 and "scope 'global'" in refused.stderr
        added = _cli(cli, "add", "I use Kubernetes", "--category", "tech_stack", "--scope", "global", "--user", user,
                     "--wait", "--json")
        assert added.returncode == 0, added.stderr
        [memory] = json.loads(added.stdout)["result"]["memories"]
        assert (memory["scope"], memory["project_id"]) == ("global", None)
        usage = _cli(cli, "add", "I use Kubernetes", "--scope", "global", "--user", user)
        assert usage.returncode == 2 and "--scope goes with --category" in usage.stderr
    finally:
        stop(proc)
