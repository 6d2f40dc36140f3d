"""Token counts for budgets (GET /v1/context's `max_tokens`): the embedder's own tokenizer, not characters.

The local embedder's `tokenizer.json` (the registry model's, e.g. e5-small-v2's, or EMBEDDER_MODEL_DIR's) is
loaded with the `tokenizers` library the embedder already uses, without its truncation, so a long memory counts
in full. With another embedder (Gemini, the test hash embedder) the default model's tokenizer is used when its
package is installed; only without it are tokens estimated (words and punctuation marks, which undercounts
word pieces), and a warning says so once.
"""

from __future__ import annotations

import importlib.util
import re
import threading
from pathlib import Path
from typing import Any, Protocol

import structlog

from service.ai.local import MODEL_PACKAGE

log = structlog.get_logger(__name__)

_PIECES = re.compile(r"\w+|[^\w\s]")


class TokenCounter(Protocol):
    name: str  # which tokenizer counts ("all-MiniLM-L6-v2", or "estimate")

    def count(self, text: str) -> int:
        """The number of tokens `text` is, without the model's special tokens ([CLS], [SEP])."""


class HFTokenCounter:
    """A `tokenizers` tokenizer.json, loaded on first use."""

    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self.name = name
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._tokenizer is None:
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_file(str(self.path))
                tokenizer.no_truncation()
                tokenizer.no_padding()
                self._tokenizer = tokenizer
        return self._tokenizer

    def count(self, text: str) -> int:
        if not text:
            return 0
        tokenizer = self._tokenizer or self._load()
        return len(tokenizer.encode(text, add_special_tokens=False).ids)


class EstimatedTokens:
    name = "estimate"

    def count(self, text: str) -> int:
        return len(_PIECES.findall(text))


def default_tokenizer() -> Path | None:
    """The default model's tokenizer.json from its package, when it is installed."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "model" / "tokenizer.json"
    return path if path.is_file() else None


def token_counter(embedder: object) -> TokenCounter:
    """The counter of `embedder`'s tokens: its tokenizer.json when it has one (the local embedder), else the
    default model's, else an estimate."""
    files = getattr(getattr(embedder, "inner", embedder), "files", None)  # BatchingEmbedder wraps the local one
    path = getattr(files, "tokenizer", None)
    if isinstance(path, Path) and path.is_file():
        return HFTokenCounter(path, str(getattr(files, "model_id", path.parent.name)))
    if (default := default_tokenizer()) is not None:
        return HFTokenCounter(default, "all-MiniLM-L6-v2")
    log.warning("token_count_estimated", reason=f"no tokenizer.json: install {MODEL_PACKAGE}")
    return EstimatedTokens()
