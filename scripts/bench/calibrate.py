"""Similarity thresholds per embedding model: what the `Calibration` values rest on (core/embedding_models.py).

    .venv/bin/python scripts/bench/calibrate.py [--cache .test-stack/models]

For every registered model (its files fetched: `python -m service models fetch --all`):

- dedup: the cosines of labelled near-duplicate memories and of different facts on one subject
  (tests/data/similarity_pairs.json, passages); the threshold must lie between the highest negative and the
  lowest positive;
- names: the cosines of the entity-name pairs of the resolution sets (tests/data/resolution_*.jsonl, symmetric
  texts); `name_floor` is the level the model's cosines are rescaled from, fitted (least squares) so that the
  rescaled cosines match all-MiniLM-L6-v2's, on which the gate's bands were chosen;
- query: the cosines of a search and a memory that answers it, and of one about something else; `run_match` is the
  model's counterpart of MiniLM's 0.2, fitted the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import numpy as np

from service.ai.local import LocalEmbedder, ModelFiles
from service.core.embedding_models import MINILM, MODELS, ModelSpec

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def name_pairs() -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for path in sorted(DATA.glob("resolution_*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                pairs.append((row["a"]["name"], row["b"]["name"]))
    return pairs


async def cosines(embedder: LocalEmbedder, pairs: list[tuple[str, str]], kind: str) -> np.ndarray:
    left, right = [a for a, _ in pairs], [b for _, b in pairs]
    if kind == "symmetric":
        a, b = await embedder.embed_symmetric(left), await embedder.embed_symmetric(right)
    elif kind == "query":
        a = [await embedder.embed_query(t) for t in left]
        b = await embedder.embed(right)
    else:
        a, b = await embedder.embed(left), await embedder.embed(right)
    result: np.ndarray = np.einsum("ij,ij->i", np.asarray(a), np.asarray(b))
    return result


def fit_floor(model: np.ndarray, reference: np.ndarray) -> float:
    """The floor f minimising sum((model - f) / (1 - f) - max(reference, 0))^2 over a grid."""
    target = np.maximum(reference, 0.0)
    grid = np.arange(-0.2, 0.95, 0.005)
    errors = [float((((np.maximum(model, f) - f) / (1 - f) - target) ** 2).sum()) for f in grid]
    return round(float(grid[int(np.argmin(errors))]), 3)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=ROOT / ".test-stack" / "models")
    args = parser.parse_args()
    sets = json.loads((DATA / "similarity_pairs.json").read_text(encoding="utf-8"))
    names = name_pairs()
    measured: dict[str, dict[str, np.ndarray]] = {}
    specs: list[ModelSpec] = list(MODELS.values())
    for spec in specs:
        embedder = LocalEmbedder(ModelFiles.registered(spec, args.cache))
        measured[spec.id] = {
            "dedup+": await cosines(embedder, [tuple(p) for p in sets["dedup"]["positive"]], "passage"),
            "dedup-": await cosines(embedder, [tuple(p) for p in sets["dedup"]["negative"]], "passage"),
            "query+": await cosines(embedder, [tuple(p) for p in sets["query"]["positive"]], "query"),
            "query-": await cosines(embedder, [tuple(p) for p in sets["query"]["negative"]], "query"),
            "names": await cosines(embedder, names, "symmetric"),
        }
    ref = measured[MINILM.id]
    print(f"{'model':<18} {'dedup: max neg':>14} {'min pos':>8} {'set':>6} | {'names floor':>11} {'set':>6} | "
          f"{'query: max neg':>14} {'min pos':>8} {'fit':>6} {'set':>6}")
    for spec in specs:
        m, cal = measured[spec.id], spec.calibration
        floor = fit_floor(m["names"], ref["names"])
        both_q = np.concatenate([m["query+"], m["query-"]])
        ref_q = np.concatenate([ref["query+"], ref["query-"]])
        q_floor = fit_floor(both_q, ref_q)
        run_fit = round(q_floor + (1 - q_floor) * MINILM.calibration.run_match, 3)
        print(f"{spec.id:<18} {m['dedup-'].max():>14.3f} {m['dedup+'].min():>8.3f} {cal.dedup:>6.3f} | "
              f"{floor:>11.3f} {cal.name_floor:>6.3f} | {m['query-'].max():>14.3f} {m['query+'].min():>8.3f} "
              f"{run_fit:>6.3f} {cal.run_match:>6.3f}")
        names_scaled = np.array([cal.semantic(float(c)) for c in m["names"]])
        reference = np.maximum(ref["names"], 0).mean()
        print(f"{'':<18} names rescaled: mean {names_scaled.mean():.3f} (MiniLM {reference:.3f}), {len(names)} pairs")


if __name__ == "__main__":
    asyncio.run(main())
