"""Similarity thresholds per embedding model: what the `Calibration` values rest on (core/embedding_models.py).

    .venv/bin/python scripts/bench/calibrate.py [--cache .test-stack/models] [--smoke]

For every registered model (its files fetched: `python -m service models fetch --all`):

- dedup: the cosines of labelled near-duplicate memories and of different facts on one subject
  (tests/data/similarity_pairs.json, passages); the threshold must lie between the highest negative and the
  lowest positive;
- names: the cosines of the entity-name pairs of the resolution sets (tests/data/resolution_*.jsonl, symmetric
  texts); `name_floor` is the level the model's cosines are rescaled from, fitted (least squares) so that the
  rescaled cosines match all-MiniLM-L6-v2's, on which the gate's bands were chosen;
- query: the cosines of a search and a memory that answers it, and of one about something else; `run_match` is the
  model's counterpart of MiniLM's 0.2, fitted the same way;
- relevance: on the assistant histories (scripts/bench/data/assistant_histories.json), the cosine of each answered
  question and the exchange that answers it (`user: ...` / `assistant: ...`, as a window is stored), and of each
  question the history cannot answer and its nearest exchange. `relevance` is the highest floor that keeps 95% of
  the answers (what recall and the context drop below it, docs/retrieval.md "The relevance floor"); the table
  says the share of unanswerable questions whose nearest exchange falls below each candidate.

`--smoke`: every model's lines on a subset (SMOKE_NAMES name pairs, SMOKE_HISTORIES histories; the model files from
MODEL_CACHE_DIR unless `--cache`), then `smoke: OK` when every cosine is finite and every set measured, else
`smoke: FAIL` and exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import traceback
from pathlib import Path

import numpy as np

from service.ai.local import LocalEmbedder, ModelFiles
from service.core.embedding_models import MINILM, MODELS, ModelSpec

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
HISTORIES = ROOT / "scripts" / "bench" / "data" / "assistant_histories.json"
KEEP_ANSWERS = 0.95  # the share of answering exchanges the relevance floor keeps
SMOKE_NAMES = 40  # --smoke: the name pairs measured (the first of each resolution set, in turn)
SMOKE_HISTORIES = 4  # --smoke: the assistant histories measured


def name_pairs(limit: int | None = None) -> list[tuple[str, str]]:
    """The resolution sets' name pairs; with `limit`, that many taken from the sets in turn."""
    sets: list[list[tuple[str, str]]] = []
    for path in sorted(DATA.glob("resolution_*.jsonl")):
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        sets.append([(row["a"]["name"], row["b"]["name"]) for row in rows])
    if limit is None:
        return [pair for pairs in sets for pair in pairs]
    mixed = [pairs[i] for i in range(max(map(len, sets), default=0)) for pairs in sets if i < len(pairs)]
    return mixed[:limit]


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


def exchanges(history: dict[str, object]) -> list[str]:
    """A history's exchanges as its windows store them: each user message with the assistant's reply."""
    out: list[str] = []
    for session in history["sessions"]:  # type: ignore[attr-defined]
        messages = session["messages"]
        for i, m in enumerate(messages):
            if m["role"] == "user":
                after = messages[i + 1] if i + 1 < len(messages) else None
                reply = after["content"] if after is not None and after["role"] != "user" else ""
                out.append(f"user: {m['content']}" + (f"\nassistant: {reply}" if reply else ""))
    return out


async def relevance(embedder: LocalEmbedder, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(cosines of answered questions and their answering exchange, best cosines of unanswerable questions), over
    the first `limit` histories (all: None)."""
    answered: list[float] = []
    unanswerable: list[float] = []
    for history in json.loads(HISTORIES.read_text(encoding="utf-8"))["histories"][:limit]:
        texts = exchanges(history)
        vectors = np.asarray(await embedder.embed(texts))
        for q in history["questions"]:
            scores = vectors @ np.asarray(await embedder.embed_query(q["question"]))
            if q["answer"] is None:
                unanswerable.append(float(scores.max()))
                continue
            hits = [float(s) for t, s in zip(texts, scores, strict=True) if q["answer"].casefold() in t.casefold()]
            if hits:
                answered.append(max(hits))
    return np.asarray(answered), np.asarray(unanswerable)


def relevance_floor(answered: np.ndarray) -> float:
    """The highest floor (0.005 steps) that keeps KEEP_ANSWERS of the answering exchanges."""
    return float(np.floor(np.quantile(answered, 1 - KEEP_ANSWERS) / 0.005) * 0.005)


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=None,
                        help="the model files (default: .test-stack/models; with --smoke MODEL_CACHE_DIR if set)")
    parser.add_argument("--smoke", action="store_true",
                        help=f"a short check: {SMOKE_NAMES} name pairs, {SMOKE_HISTORIES} histories, every model")
    args = parser.parse_args(argv)
    if args.cache is None:
        env_cache = os.environ.get("MODEL_CACHE_DIR") if args.smoke else None
        args.cache = Path(env_cache) if env_cache else ROOT / ".test-stack" / "models"
    sets = json.loads((DATA / "similarity_pairs.json").read_text(encoding="utf-8"))
    names = name_pairs(SMOKE_NAMES if args.smoke else None)
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
        measured[spec.id]["answered"], measured[spec.id]["unanswerable"] = await relevance(
            embedder, SMOKE_HISTORIES if args.smoke else None)
    ref = measured[MINILM.id]
    print(f"{'model':<18} {'dedup: max neg':>14} {'min pos':>8} {'set':>6} | {'names floor':>11} {'set':>6} | "
          f"{'query: max neg':>14} {'min pos':>8} {'fit':>6} {'set':>6}")
    printed = 0
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
        answered, unanswerable = measured[spec.id]["answered"], measured[spec.id]["unanswerable"]
        fit = relevance_floor(answered)
        print(f"{'':<18} relevance: fit {fit:.3f} set {cal.relevance}; {len(answered)} answers, "
              f"{len(unanswerable)} unanswerable questions")
        for floor in sorted({fit, cal.relevance or 0.0, round(fit - 0.02, 3), round(fit + 0.02, 3)}):
            print(f"{'':<18}   floor {floor:.3f}: answers kept {(answered >= floor).mean():.3f}, "
                  f"unanswerable left empty {(unanswerable < floor).mean():.3f}")
        printed += 1
    if args.smoke:
        ok = printed == len(specs) == len(MODELS) and all(
            values.size > 0 and bool(np.isfinite(values).all()) and bool((np.abs(values) <= 1.0001).all())
            for m in measured.values() for values in m.values())
        print(f"smoke: {'OK' if ok else 'FAIL'}")
        if not ok:
            return 1
    return 0


async def run_main() -> int:
    """main; with --smoke, an error is a `smoke: FAIL` too (after its traceback)."""
    if "--smoke" not in sys.argv[1:]:
        return await main()
    try:
        return await main()
    except Exception:
        traceback.print_exc()
        print("smoke: FAIL")
        return 1


if __name__ == "__main__":
    sys.exit(asyncio.run(run_main()))
