"""The examples the docs mark as runnable run as written against a real `python -m service` (embedded profile, its
default AUTH_MODE=none on loopback, MCP over stdio as `./scripts/dev.sh` serves it).

The marker is an HTML comment on the line right before the fence, in README.md and docs/*.md:

    <!-- runnable -->
    ```bash            (or ```python)

Only the address changes: `http://127.0.0.1:8199` and `localhost:8199` become the test service's. A bash block runs
under `set -euo pipefail` with `curl` failing on any 4xx/5xx (its body still printed), a python block with this
interpreter from the checkout.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.bench.procs import ROOT, cli_env, stack_env, start_service, stop
from tests.conftest import unique

MARKER = "<!-- runnable -->"
BLOCK = re.compile(r"^" + re.escape(MARKER) + r"\n```(bash|python)\n(.*?)^```", re.MULTILINE | re.DOTALL)
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CURL_FAILS = "curl() { command curl --fail-with-body --show-error \"$@\"; }\n"


def runnable() -> list[tuple[str, str, str]]:
    """(where, language, code) of every marked block."""
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for m in BLOCK.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append((f"{doc.relative_to(ROOT)}:{line}", m.group(1), m.group(2)))
    return found


EXAMPLES = runnable()


def test_the_docs_mark_their_examples() -> None:
    marked = {where.split(":")[0] for where, _, _ in EXAMPLES}
    assert {"README.md", "docs/runs.md"} <= marked, marked
    assert any(lang == "python" for _, lang, _ in EXAMPLES)
    # every marker sits right before a fence the test reads (a marker before anything else would be ignored)
    for doc in DOCS:
        text = doc.read_text()
        markers = [line for line in text.splitlines() if line.strip() == MARKER]
        assert len(markers) == len(BLOCK.findall(text)), doc


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("docs")
    env = stack_env(tmp / "data", unique("test:docsq"), DEDUP_CRON_ENABLED="false")
    proc, port = start_service(env, tmp / "service.log")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


def _address(code: str, api: str) -> str:
    return code.replace("http://127.0.0.1:8199", api).replace("localhost:8199", api)


@pytest.mark.parametrize(("where", "language", "code"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_a_runnable_example_runs(api: str, where: str, language: str, code: str, tmp_path: Path) -> None:
    env = cli_env({}, drop=("REDIS_", "ARQ_", "MEMORY_", "NEO4J_"))
    if language == "bash":
        script = "set -euo pipefail\n" + CURL_FAILS + _address(code, api)
        done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
    else:
        path = tmp_path / "example.py"
        path.write_text(_address(code, api))
        done = subprocess.run([sys.executable, str(path)], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=120)
    report = textwrap.shorten(done.stdout + done.stderr, 3000)
    assert done.returncode == 0, f"{where} failed ({done.returncode}): {report}"
    assert '"code":' not in done.stdout, f"{where} printed an error body: {report}"
    # an MCP tool error has no structured content: printed, it is the line `None`
    assert "None" not in done.stdout.splitlines(), f"{where} printed a tool error: {report}"
