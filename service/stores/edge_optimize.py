"""`python -m service.stores.edge_optimize <shard dir>`: build a Qdrant Edge shard's indexes (segment merge +
HNSW) in a process of its own.

`EdgeShard.optimize()` holds the GIL for its whole run, so it never runs in the process that answers requests:
`EdgeVectorStore.optimize` (`edge_build`) copies the live shard, runs this on the copy (a directory no
other process holds, so one process per shard still holds), and swaps the optimized copy in
(docs/decisions.md, "Where the HNSW build runs"). Prints one JSON line of figures; exit 0 on success."""

from __future__ import annotations

import json
import sys
import time

import qdrant_edge as qe


def main(path: str) -> int:
    started = time.perf_counter()
    shard = qe.EdgeShard.load(path)
    try:
        changed = shard.optimize()
        info = shard.info()
        shard.flush()
    finally:
        shard.close()
    print(json.dumps({"changed": changed, "points": info.points_count, "indexed": info.indexed_vectors_count,
                      "segments": info.segments_count, "seconds": round(time.perf_counter() - started, 2)}))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python -m service.stores.edge_optimize <shard dir>", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
