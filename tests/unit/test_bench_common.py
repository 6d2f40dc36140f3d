"""The CPU accounting write_path.py uses to say where a memory's CPU goes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from scripts.bench.common import cpu_seconds

BURN = (
    "import sys, time\n"
    "t = time.process_time()\n"
    "while time.process_time() - t < 0.4: pass\n"  # bounded busy loop
    "print('done', flush=True)\n"
    "sys.stdin.read()\n"
)


def test_cpu_seconds_counts_a_process_with_its_live_children() -> None:
    own_before = cpu_seconds(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "done"  # the child has burned 0.4 s of CPU and is still alive
        assert cpu_seconds(child.pid) >= 0.35
        assert cpu_seconds(os.getpid()) - own_before >= 0.35  # the parent's tree includes the live child
    finally:
        child.kill()
        child.wait(timeout=10)
    assert cpu_seconds(child.pid) == 0.0  # gone: nothing to count


def test_cpu_seconds_grows_with_work_in_this_process() -> None:
    before = cpu_seconds(os.getpid())
    t = time.process_time()
    while time.process_time() - t < 0.2:  # bounded busy loop
        pass
    assert cpu_seconds(os.getpid()) - before >= 0.15
