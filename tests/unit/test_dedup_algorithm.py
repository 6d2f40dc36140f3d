"""The dedup algorithm without services: union-find, tiled near-duplicate search against a brute-force
reference, exact grouping, survivor choice, and the cron registration."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from service.core.settings import Settings
from service.maintenance.algorithm import (
    BoundaryCollector,
    DisjointSets,
    NearDuplicateFinder,
    groups_of,
    newest_rank,
    plan_boundary,
    stamp_of,
)
from service.maintenance.sweep import run_budget
from worker.embedded import worker_options


def components(n: int, pairs: Sequence[tuple[int, int]]) -> list[set[int]]:
    """Connected components with more than one member, by a plain graph walk (the reference)."""
    adj: dict[int, set[int]] = {i: set() for i in range(n)}
    for a, b in pairs:
        adj[a].add(b)
        adj[b].add(a)
    seen: set[int] = set()
    out: list[set[int]] = []
    for start in range(n):
        if start in seen:
            continue
        comp, todo = {start}, [start]
        while todo:
            for nxt in adj[todo.pop()] - comp:
                comp.add(nxt)
                todo.append(nxt)
        seen |= comp
        if len(comp) > 1:
            out.append(comp)
    return out


def sets_of(ds: DisjointSets) -> list[set[int]]:
    roots = ds.roots()
    by_root: dict[int, set[int]] = {}
    for i, r in enumerate(roots.tolist()):
        by_root.setdefault(r, set()).add(i)
    return [s for s in by_root.values() if len(s) > 1]


def canon(groups: list[set[int]]) -> list[list[int]]:
    return sorted(sorted(g) for g in groups)


# -------------------------------------------------------------------------------------------
# union-find
# -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["random", "star", "chain", "reverse_chain", "dense"])
def test_disjoint_sets_match_graph_components(shape: str) -> None:
    rng = np.random.default_rng(7)
    n = 300
    if shape == "random":
        pairs = [tuple(rng.choice(n, 2, replace=False).tolist()) for _ in range(200)]
    elif shape == "star":
        pairs = [(0, i) for i in range(1, n)]
    elif shape == "chain":
        pairs = [(i, i + 1) for i in range(n - 1)]
    elif shape == "reverse_chain":
        pairs = [(i + 1, i) for i in reversed(range(n - 1))]
    else:
        pairs = list(itertools.combinations(range(40), 2))
    ds = DisjointSets(n)
    # in several batches, as tiles deliver them
    for chunk in np.array_split(np.asarray(pairs, dtype=np.int64), 5):
        if len(chunk):
            ds.union(chunk[:, 0].copy(), chunk[:, 1].copy())
    assert canon(sets_of(ds)) == canon(components(n, pairs))
    assert all(int(p) <= i for i, p in enumerate(ds.parent.tolist()))  # parents point downwards


def test_groups_keep_highest_rank() -> None:
    roots = np.array([0, 0, 2, 0, 4, 2], dtype=np.int64)
    rank = np.array([5, 1, 0, 3, 4, 2], dtype=np.int64)
    assert sorted(groups_of(roots, rank)) == [(0, [1, 3]), (5, [2])]
    assert groups_of(np.arange(3, dtype=np.int64), np.arange(3, dtype=np.int64)) == []
    assert groups_of(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)) == []


# -------------------------------------------------------------------------------------------
# near duplicates: tiles vs brute force
# -------------------------------------------------------------------------------------------


def clustered(n: int, dim: int, seed: int) -> np.ndarray:
    """Random directions plus some tight clusters (near duplicates) and chains."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    for start in range(0, n - 4, 9):  # every 9th: a small cluster around one direction
        base = x[start]
        for k in range(1, 4):
            x[start + k] = base + rng.standard_normal(dim).astype(np.float32) * 0.12 * k
    return x


def brute_force(x: np.ndarray, threshold: float) -> list[set[int]]:
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    sims = u @ u.T
    pairs = [(int(i), int(j)) for i, j in zip(*np.nonzero(np.triu(sims >= np.float32(threshold), 1)), strict=True)]
    return components(len(x), pairs)


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (3, 5), (7, 4), (16, 64), (1024, 4096)])
def test_tiled_search_equals_brute_force(rows: int, cols: int) -> None:
    x = clustered(157, 24, seed=rows * 31 + cols)
    for threshold in (0.9, 0.97):
        reference = brute_force(x.copy(), threshold)
        assert reference, "the data should contain near duplicates"
        finder = NearDuplicateFinder(x.copy(), threshold, rows, cols)
        steps = finder.steps_left
        finder.run()
        assert finder.done and steps == -(-157 // rows)
        assert canon(sets_of(finder.sets)) == canon(reference)


def test_threshold_is_inclusive_and_vectors_are_normalised() -> None:
    # [3, 4] / 5 = [0.6, 0.8]: its cosine with [1, 0] is exactly float32(0.6)
    x = np.array([[1, 0], [3, 4], [0, 1]], dtype=np.float32)
    finder = NearDuplicateFinder(x, 0.6)
    finder.run()
    assert canon(sets_of(finder.sets)) == [[0, 1, 2]]  # 0~1 at 0.6, 1~2 at 0.8: one group (transitive)
    above = NearDuplicateFinder(np.array([[1, 0], [3, 4]], dtype=np.float32), 0.61)
    above.run()
    assert sets_of(above.sets) == []


def test_zero_and_single_vectors() -> None:
    empty = NearDuplicateFinder(np.zeros((0, 4), dtype=np.float32), 0.9)
    assert empty.done and empty.steps_left == 0
    zero = NearDuplicateFinder(np.zeros((2, 4), dtype=np.float32), 0.9)  # zero vectors match nothing
    zero.run()
    assert sets_of(zero.sets) == []


# -------------------------------------------------------------------------------------------
# the plan of one boundary
# -------------------------------------------------------------------------------------------


def unit(angle: float, dim: int = 8) -> list[float]:
    v = [0.0] * dim
    v[0], v[1] = float(np.cos(angle)), float(np.sin(angle))
    return v


def at(cos: float) -> float:
    return float(np.arccos(cos))


def test_stamps_and_newest_rank() -> None:
    assert stamp_of("2025-01-01T00:00:00Z") == stamp_of("2025-01-01T00:00:00+00:00") == stamp_of("2025-01-01T00:00:00")
    assert stamp_of("2025-01-01T01:00:00+01:00") == stamp_of("2025-01-01T00:00:00Z")
    assert stamp_of("2025-01-01T00:00:00.000001Z") == stamp_of("2025-01-01T00:00:00Z") + 1  # type: ignore[operator]
    assert stamp_of("yesterday") is None and stamp_of(None) is None and stamp_of("") is None
    # newest = latest created_at; on a tie the larger id
    rank = newest_rank([5, 9, 9, 1], ["d", "a", "b", "c"])
    assert rank.tolist() == [1, 2, 3, 0]


def test_exact_group_keeps_newest_with_id_tiebreak() -> None:
    v = unit(0.0)
    plan = plan_boundary([
        ("m-old", "h1", 100, v),
        ("m-new", "h1", 300, v),
        ("m-mid", "h1", 200, v),
        ("z-tie", "h2", 50, unit(1.0)),
        ("a-tie", "h2", 50, unit(1.0)),
        ("alone", "h3", 10, unit(2.0)),
    ], 0.95)
    assert plan.exact == [("m-new", ["m-mid", "m-old"]), ("z-tie", ["a-tie"])]
    assert plan.near == []
    assert plan.scanned == 6 and plan.near_scanned == 3


def test_near_chain_is_one_group_and_decoys_stay() -> None:
    step = at(0.96)  # A~B 0.96, B~C 0.96, A~C = cos(2*step) = 0.843 < 0.95: one group through B
    plan = plan_boundary([
        ("a", "ha", 1, unit(0.0)),
        ("b", "hb", 2, unit(step)),
        ("c", "hc", 3, unit(2 * step)),
        ("decoy-1", "hd1", 4, unit(1.5)),
        ("decoy-2", "hd2", 5, unit(1.5 + at(0.94))),  # 0.94: below the threshold
    ], 0.95)
    assert plan.near == [("c", ["a", "b"])]
    assert plan.exact == []


def test_exact_then_near_survivor_is_final() -> None:
    # x1, x2 same content (x2 newer); y is a near duplicate of x and newer than both
    plan = plan_boundary([
        ("x1", "hx", 1, unit(0.0)),
        ("x2", "hx", 2, unit(0.0)),
        ("y", "hy", 3, unit(at(0.97))),
    ], 0.95)
    assert plan.exact == [("x2", ["x1"])]
    assert plan.near == [("y", ["x2"])]
    assert plan.survivor_of() == {"x1": "y", "x2": "y"}


def test_collector_streams_pages_like_one_batch() -> None:
    rng = np.random.default_rng(3)
    items = [(f"id{i:03d}", f"h{i % 37}", int(rng.integers(0, 1000)), rng.standard_normal(6).tolist())
             for i in range(200)]
    one = plan_boundary(items, 0.8)
    collector = BoundaryCollector(expected=3)  # grows several times
    for start in range(0, len(items), 7):
        page = items[start : start + 7]
        collector.add([p[0] for p in page], [p[1] for p in page], [p[2] for p in page],
                      np.asarray([p[3] for p in page], dtype=np.float32))
    assert collector.scanned == 200 and collector.rows == 37
    assert collector.exact_groups() == one.exact
    by_hash: dict[str, list[tuple[int, str]]] = {}
    for mid, h, st, _ in items:
        by_hash.setdefault(h, []).append((st, mid))
    assert sorted(keep for keep, _ in one.exact) == sorted(max(v)[1] for v in by_hash.values())


# -------------------------------------------------------------------------------------------
# scheduling
# -------------------------------------------------------------------------------------------


def _dedup_crons(settings: Settings) -> list[Any]:
    return [j for j in worker_options(settings)["cron_jobs"] if j.name == "dedup_cron"]


def test_cron_registered_at_configured_hours() -> None:
    settings = Settings(_env_file=None, dedup_cron_hours={3, 15})  # type: ignore[call-arg]
    [job] = _dedup_crons(settings)
    assert job.name == "dedup_cron" and job.hour == {3, 15} and job.minute == 0 and job.unique
    assert job.timeout_s is None  # the worker's ARQ_JOB_TIMEOUT: crash reruns stay prompt
    default = _dedup_crons(Settings(_env_file=None))  # type: ignore[call-arg]
    assert default[0].hour == {0, 6, 12, 18}
    off = Settings(_env_file=None, dedup_cron_enabled=False)  # type: ignore[call-arg]
    assert _dedup_crons(off) == []


def test_reconcile_crons_registered() -> None:
    settings = Settings(_env_file=None, reconcile_interval_seconds=15, reconcile_cron_hour=4)  # type: ignore[call-arg]
    jobs = {j.name: j for j in worker_options(settings)["cron_jobs"]}
    tick, daily = jobs["reconcile_tick"], jobs["reconcile_cron"]
    assert tick.second == {0, 15, 30, 45} and tick.run_at_startup and tick.unique
    assert daily.hour == 4 and daily.unique and not daily.run_at_startup
    off = Settings(_env_file=None, reconcile_cron_enabled=False)  # type: ignore[call-arg]
    assert "reconcile_cron" not in {j.name for j in worker_options(off)["cron_jobs"]}
    with pytest.raises(ValueError, match="divide 60"):
        Settings(_env_file=None, reconcile_interval_seconds=7)  # type: ignore[call-arg]


def test_run_budget_fits_inside_the_job_deadline() -> None:
    assert run_budget(Settings(_env_file=None, arq_job_timeout=300).redis) == pytest.approx(290 * 0.8)  # type: ignore[call-arg]
    assert run_budget(Settings(_env_file=None, arq_job_timeout=30).redis) == pytest.approx(27 * 0.8)  # type: ignore[call-arg]
