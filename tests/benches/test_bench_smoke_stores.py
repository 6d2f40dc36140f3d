"""The benches that work on the stores and the models directly (no service of their own) run their `--smoke` mode:
the other half of tests/benches/test_bench_smoke.py."""

from __future__ import annotations

import pytest

from tests.benches.test_bench_smoke import ON_THE_STORES, smoke


@pytest.mark.parametrize("script", ON_THE_STORES)
def test_a_bench_on_the_stores_runs_its_smoke(script: str) -> None:
    smoke(script)
