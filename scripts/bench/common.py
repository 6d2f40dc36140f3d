"""What every benchmark shares: one percentile definition, so every table in docs/benchmarks.md is computed
the same way. Process helpers (free ports, starting Redis / Neo4j / the service) are in
tests/integration/procs.py, shared by the tests and the benchmarks that start their own stack."""

from __future__ import annotations

import math


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (the smallest value with at least q % of the values at or below it);
    0.0 for an empty list."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]
