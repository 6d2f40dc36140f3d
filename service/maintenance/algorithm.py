"""The dedup algorithm, pure (no I/O): exact groups by hash, near-duplicate groups by cosine similarity in
bounded numpy tiles with union-find, and the plan of what to remove. Two memories that state different numbers
("a budget of 120 euros" / "150 euros", "4-space" / "2-space indentation") are never near-duplicates, however close
their vectors: a correction is not a repetition. Unit-tested in
tests/unit/test_dedup_algorithm.py; described in docs/dedup.md."""


from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt
import structlog

from service.core.domain import Memory
from service.stores.vector import Boundary, VectorRecord

log = structlog.get_logger(__name__)

BLOCK_ROWS = 1024  # rows of one similarity tile (one worker-thread call handles one row block)
BLOCK_COLS = 4096  # columns of one tile: a tile is BLOCK_ROWS x BLOCK_COLS float32 = 16 MiB
FloatMatrix = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]


# =================================================================================================
# The algorithm (pure, no I/O): unit-tested in tests/unit/test_dedup_algorithm.py
# =================================================================================================

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def numbers_key(content: str) -> int:
    """A key of the numbers a text states (in any order; "1,450" and "1450" alike): equal keys for the same
    numbers, 0 for a text without any."""
    found = sorted({n.replace(",", "") for n in _NUMBER.findall(content)})
    return zlib.crc32("\x1f".join(found).encode()) if found else 0


def stamp_of(value: str | None) -> int | None:
    """Microseconds since the epoch of an ISO-8601 time (naive = UTC); None when missing or unreadable."""
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return (dt - _EPOCH) // timedelta(microseconds=1)


def newest_rank(stamps: Sequence[int], ids: Sequence[str]) -> IntArray:
    """rank[i] = position of memory i ordered by (created_at, id): the highest rank is the newest."""
    order = sorted(range(len(ids)), key=lambda i: (stamps[i], ids[i]))
    rank = np.empty(len(ids), dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(len(ids), dtype=np.int64)
    return rank


class DisjointSets:
    """Union-find over 0..n-1 on a numpy parent array; unions arrive as whole arrays of pairs.

    Parents always point to a smaller index, so there are no cycles. A batch of pairs is merged by
    hooking each larger root onto the smallest root it is paired with (`np.minimum.at`) and repeating
    on the pairs whose roots still differ; a star or a long chain converges in a few rounds because
    roots are found by pointer jumping. Pathological inputs fall back to a scalar loop after 64 rounds.
    """

    def __init__(self, n: int) -> None:
        self.parent: IntArray = np.arange(n, dtype=np.int64)

    def find(self, x: IntArray) -> IntArray:
        p = self.parent
        r = p[x]
        for _ in range(64):
            rr = p[r]
            if np.array_equal(rr, r):
                return r
            r = rr
        self.compress()
        return p[x]

    def union(self, a: IntArray, b: IntArray) -> None:
        for _ in range(64):
            ra, rb = self.find(a), self.find(b)
            diff = ra != rb
            if not diff.any():
                return
            ra, rb = ra[diff], rb[diff]
            lo, hi = np.minimum(ra, rb), np.maximum(ra, rb)
            np.minimum.at(self.parent, hi, lo)
            a, b = lo, hi
        for x, y in zip(a.tolist(), b.tolist(), strict=True):
            self._union_one(x, y)

    def _union_one(self, x: int, y: int) -> None:
        p = self.parent
        rx, ry = self._find_one(x), self._find_one(y)
        if rx != ry:
            p[max(rx, ry)] = min(rx, ry)

    def _find_one(self, x: int) -> int:
        p = self.parent
        for _ in range(len(p) + 1):
            px = int(p[x])
            if px == x:
                return x
            p[x] = p[px]  # path halving
            x = px
        raise RuntimeError("union-find parent cycle")  # impossible: parents point downwards

    def compress(self) -> None:
        """Point every element straight at its root (pointer jumping: log2(depth) rounds)."""
        p = self.parent
        for _ in range(64):
            gp = p[p]
            if np.array_equal(gp, p):
                return
            p[:] = gp
        raise RuntimeError("union-find did not converge")

    def roots(self) -> IntArray:
        self.compress()
        return self.parent


def groups_of(roots: IntArray, rank: IntArray) -> list[tuple[int, list[int]]]:
    """(keep, [remove...]) for every set with more than one member; keep = the member of highest rank."""
    n = len(roots)
    if n == 0:
        return []
    sizes = np.bincount(roots, minlength=n)
    members = np.flatnonzero(sizes[roots] > 1)
    if members.size == 0:
        return []
    ordered = members[np.lexsort((rank[members], roots[members]))]
    r = roots[ordered]
    cuts = np.flatnonzero(np.diff(r)) + 1
    out: list[tuple[int, list[int]]] = []
    for chunk in np.split(ordered, cuts):
        items = chunk.tolist()
        out.append((items[-1], items[:-1]))
    return out


class NearDuplicateFinder:
    """Pairs at cosine >= threshold over the upper triangle of X·Xᵀ, tile by tile, merged in union-find.

    Memory: the unit-length matrix (n x d float32, owned: normalised in place), one tile of
    BLOCK_ROWS x BLOCK_COLS float32 and its mask, the pairs of one tile, and the n-long parent array.
    `step()` handles one row block against every column at or right of it; callers run it in a worker
    thread and may stop between steps.
    """

    def __init__(
        self, vectors: FloatMatrix, threshold: float, block_rows: int = BLOCK_ROWS, block_cols: int = BLOCK_COLS,
        numbers: Sequence[int] | None = None,
    ) -> None:
        """`numbers`: each row's `numbers_key`; rows whose keys differ never pair."""
        x = vectors if vectors.dtype == np.float32 else vectors.astype(np.float32)
        if x.ndim != 2:
            raise ValueError(f"vectors must be a matrix, got shape {x.shape}")
        norms = np.sqrt(np.einsum("ij,ij->i", x, x))  # no n x d temporary (np.linalg.norm makes one)
        norms[norms == 0] = 1.0
        x /= norms[:, None]
        self._x = x
        self._n = int(x.shape[0])
        self._threshold = np.float32(threshold)
        self._numbers = None if numbers is None else np.asarray(numbers, dtype=np.int64)
        self._rows = max(1, block_rows)
        self._cols = max(1, block_cols)
        self._next = 0
        self.sets = DisjointSets(self._n)
        self.pairs = 0
        self.tiles = 0

    @property
    def done(self) -> bool:
        return self._next >= self._n

    @property
    def steps_left(self) -> int:
        return -(-(self._n - self._next) // self._rows)

    def step(self) -> None:
        i0 = self._next
        i1 = min(self._n, i0 + self._rows)
        rows = self._x[i0:i1]
        found = 0
        for j0 in range(i0, self._n, self._cols):
            j1 = min(self._n, j0 + self._cols)
            mask = (rows @ self._x[j0:j1].T) >= self._threshold
            self.tiles += 1
            hit_rows = np.flatnonzero(mask.any(axis=1))  # few rows have a partner: index only those
            if hit_rows.size == 0:
                continue
            r, c = np.nonzero(mask[hit_rows])
            a = hit_rows[r].astype(np.int64) + i0
            b = c.astype(np.int64) + j0
            upper = b > a  # the upper triangle only (a tile crossing the diagonal holds both halves)
            if self._numbers is not None:
                upper &= self._numbers[a] == self._numbers[b]
            if not upper.all():
                a, b = a[upper], b[upper]
            if a.size:
                self.sets.union(a, b)
                found += int(a.size)
        if found:
            self.pairs += found
            self.sets.compress()
        self._next = i1

    def run(self) -> None:
        for _ in range(self.steps_left):
            self.step()

    def groups(self, rank: IntArray) -> list[tuple[int, list[int]]]:
        return groups_of(self.sets.roots(), rank)


class BoundaryCollector:
    """One boundary's memories as they stream in, exact duplicates settled on the way.

    Each distinct hash owns one row (id, stamp, vector) held by its newest memory so far; every other
    memory of that hash is recorded as an exact duplicate of the hash. The matrix grows by half when
    full, so a boundary costs about (distinct contents) x dim x 4 bytes.
    """

    def __init__(self, expected: int = 0) -> None:
        self._expected = max(16, expected)
        self.ids: list[str] = []
        self.hashes: list[str] = []
        self.stamps: list[int] = []
        self.numbers: list[int] = []  # each row's numbers_key
        self._matrix: FloatMatrix | None = None
        self._row_of_hash: dict[str, int] = {}
        self.exact_removed: dict[str, list[str]] = {}  # hash -> the older memories of that hash
        self.scanned = 0

    @property
    def rows(self) -> int:
        return len(self.ids)

    @property
    def matrix(self) -> FloatMatrix:
        if self._matrix is None:
            return np.zeros((0, 0), dtype=np.float32)
        return self._matrix[: self.rows]

    def add(self, ids: Sequence[str], hashes: Sequence[str], stamps: Sequence[int], vectors: FloatMatrix,
            contents: Sequence[str] | None = None) -> None:
        """`contents`: the memories' texts, for their numbers (none: every row is taken to state the same)."""
        if not len(ids):
            return
        if self._matrix is None:
            self._matrix = np.empty((self._expected, vectors.shape[1]), dtype=np.float32)
        elif vectors.shape[1] != self._matrix.shape[1]:
            raise ValueError(f"vector dimension changed within a boundary: {vectors.shape[1]}")
        for k, (mid, h, st) in enumerate(zip(ids, hashes, stamps, strict=True)):
            self.scanned += 1
            row = self._row_of_hash.get(h)
            if row is None:
                row = self.rows
                if row >= self._matrix.shape[0]:
                    grown = np.empty((row + row // 2 + 16, self._matrix.shape[1]), dtype=np.float32)
                    grown[:row] = self._matrix[:row]
                    self._matrix = grown
                self._row_of_hash[h] = row
                self.ids.append(mid)
                self.hashes.append(h)
                self.stamps.append(st)
                self.numbers.append(numbers_key(contents[k]) if contents is not None else 0)
                self._matrix[row] = vectors[k]
            elif (st, mid) > (self.stamps[row], self.ids[row]):
                self.exact_removed.setdefault(h, []).append(self.ids[row])
                self.ids[row], self.stamps[row] = mid, st
                self._matrix[row] = vectors[k]
            else:
                self.exact_removed.setdefault(h, []).append(mid)

    def exact_groups(self) -> list[tuple[str, list[str]]]:
        """(keep id, [removed ids]) per hash with duplicates, in a stable order."""
        return sorted(
            ((self.ids[self._row_of_hash[h]], sorted(removed)) for h, removed in self.exact_removed.items()),
        )

    def rank(self) -> IntArray:
        return newest_rank(self.stamps, self.ids)


@dataclass
class BoundaryPlan:
    """What a sweep of one boundary removes: (keep, [remove]) per group, as ids."""

    exact: list[tuple[str, list[str]]]
    near: list[tuple[str, list[str]]]
    scanned: int
    near_scanned: int

    def survivor_of(self) -> dict[str, str]:
        """removed id -> the memory that stays in the end (an exact keep may itself be near-removed)."""
        near_to = {r: keep for keep, removed in self.near for r in removed}
        out = {r: keep for keep, removed in self.near for r in removed}
        for keep, removed in self.exact:
            final = near_to.get(keep, keep)
            for r in removed:
                out[r] = final
        return out


def plan_boundary(
    memories: Iterable[tuple[str, str, int, Sequence[float]] | tuple[str, str, int, Sequence[float], str]],
    threshold: float,
    block_rows: int = BLOCK_ROWS,
    block_cols: int = BLOCK_COLS,
) -> BoundaryPlan:
    """The whole algorithm on (id, hash, created_at stamp, vector[, content]) tuples of one boundary,
    synchronously (the sweep runs the same pieces step by step off the event loop)."""
    collector = BoundaryCollector()
    items = list(memories)
    if items:
        vectors = np.asarray([item[3] for item in items], dtype=np.float32)
        contents = [str(item[-1]) for item in items] if all(len(item) > 4 for item in items) else None
        collector.add([item[0] for item in items], [item[1] for item in items], [item[2] for item in items], vectors,
                      contents)
    return _finish_plan(collector, threshold, block_rows, block_cols)


def _finish_plan(collector: BoundaryCollector, threshold: float, block_rows: int, block_cols: int) -> BoundaryPlan:
    finder = NearDuplicateFinder(collector.matrix.copy(), threshold, block_rows, block_cols, collector.numbers)
    finder.run()
    ids = collector.ids
    near = [(ids[k], sorted(ids[r] for r in rem)) for k, rem in finder.groups(collector.rank())]
    return BoundaryPlan(collector.exact_groups(), sorted(near), collector.scanned, collector.rows)



def ingest_page(collector: BoundaryCollector, page: list[VectorRecord], cutoff: int) -> tuple[int, int]:
    """Add one page to the collector (worker thread). Returns (written after the cutoff, unreadable)."""
    ids: list[str] = []
    hashes: list[str] = []
    stamps: list[int] = []
    vecs: list[list[float]] = []
    contents: list[str] = []
    late = bad = 0
    for rec in page:
        m = rec.memory
        created, updated = stamp_of(m.created_at), stamp_of(m.updated_at)
        stored = stamp_of(m.stored_at) if m.stored_at else None
        if created is None or updated is None:
            bad += 1
        elif created > cutoff or updated > cutoff or (stored is not None and stored > cutoff):
            late += 1
        else:
            ids.append(m.id)
            hashes.append(m.hash)
            stamps.append(created)
            vecs.append(rec.vector)
            contents.append(m.content)
    if ids:
        collector.add(ids, hashes, stamps, np.asarray(vecs, dtype=np.float32), contents)
    return late, bad


def plan_ids(
    collector: BoundaryCollector, near_rows: list[tuple[int, list[int]]]
) -> tuple[BoundaryPlan, dict[str, str], dict[str, str]]:
    """The boundary's plan as ids (worker thread): groups, removed id -> final survivor, and the hash
    each involved memory had when read (exact duplicates share their group's hash)."""
    ids = collector.ids
    near = sorted((ids[k], sorted(ids[r] for r in rem)) for k, rem in near_rows)
    plan = BoundaryPlan(collector.exact_groups(), near, collector.scanned, collector.rows)
    survivor = plan.survivor_of()
    involved = set(survivor) | set(survivor.values())
    read_hash = {i: h for i, h in zip(ids, collector.hashes, strict=True) if i in involved}
    for h, removed in collector.exact_removed.items():
        read_hash.update(dict.fromkeys(removed, h))
    return plan, survivor, read_hash


def unchanged_since(m: Memory, b: Boundary, read_hash: str | None, cutoff: int) -> bool:
    updated = stamp_of(m.updated_at)
    stored = stamp_of(m.stored_at) if m.stored_at else None
    return (
        read_hash is not None
        and m.hash == read_hash
        and updated is not None
        and updated <= cutoff
        and (stored is None or stored <= cutoff)
        and m.user_id == b.user_id
        and m.scope == b.scope
        and (b.project_id is None or m.project_id == b.project_id)
    )

