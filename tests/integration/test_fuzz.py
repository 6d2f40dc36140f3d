"""The API fuzzed from its own OpenAPI (schemathesis) against the real stack with a valid admin key:
no 5xx, and every response matches what the OpenAPI documents (status codes, content types, bodies).
Bounded: a few examples per operation."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.bench.procs import ROOT, cli_env, stack_env, start_service, stop
from tests.conftest import unique


@pytest.fixture(scope="module")
def fuzz_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    env = stack_env(tmp / "data", unique("test:fuzzq"), AUTH_MODE="keys", RATE_LIMIT_WRITES_PER_MINUTE="0",
                    RATE_LIMIT_READS_PER_MINUTE="0", DEDUP_CRON_ENABLED="false")
    made = subprocess.run([sys.executable, "-m", "service", "keys", "create", "--user", "fuzz-admin", "--admin"],
                          cwd=ROOT, env=cli_env(env), capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    proc, port = start_service(env, tmp / "service.log")
    try:
        yield {"url": f"http://127.0.0.1:{port}", "key": made.stdout.strip().splitlines()[-1]}
    finally:
        stop(proc)


def test_api_conforms_to_its_openapi(fuzz_api: dict[str, str]) -> None:
    # (one test walking every operation, in a process of its own: see fuzz_openapi.py for why)
    run = subprocess.run([sys.executable, "-m", "tests.integration.fuzz_openapi", fuzz_api["url"], fuzz_api["key"]],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    statuses = {int(code): n for code, n in report["statuses"].items()}
    assert report["operations"] >= 20, report
    assert not report["failures"], "\n\n".join(report["failures"])
    assert sum(statuses.values()) >= 6 * report["operations"], statuses  # the fuzzer really called the API
    assert any(200 <= code < 300 for code in statuses), statuses
    print(f"fuzzed {report['operations']} operations: status counts {dict(sorted(statuses.items()))}")
