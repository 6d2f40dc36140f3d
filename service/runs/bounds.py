"""How much of a run's text is kept: redacted as hook observations are (service/hooks/redact.py), then cut, with
a marker. The API side (intake.py) and an import (portability.py) bound the same way."""

from __future__ import annotations

from service.hooks.redact import redact

MAX_TEXT_CHARS = 4000  # arguments (as JSON), a result, a thought, a summary: redacted, then cut to this
MAX_ERROR_CHARS = 2000


def bounded(text: str | None, limit: int = MAX_TEXT_CHARS) -> str | None:
    """Redacted (service/hooks/redact.py, as hook observations) and cut to `limit` characters, with a marker."""
    if text is None:
        return None
    clean = redact(text[: limit * 2])  # the rules are linear, but only what can be kept is scanned
    if len(text) <= limit and len(clean) <= limit:
        return clean
    return clean[:limit] + f" [+{max(len(text), len(clean)) - limit} chars]"
