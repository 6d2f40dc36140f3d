"""Sensitivity tiers: every memory is `public`, `internal` (the default), `private` or `secret`.

An API key carries a ceiling (`max_sensitivity`); a read may lower it for itself, never raise it. The ceiling of
the request being served lives in a context variable that the API's caller dependency (and the MCP transport)
sets, so every read made while serving it inherits the ceiling without each route passing it along: the vector
filter (`MemoryFilter`) takes it as its default, and the graph store's reads drop what only memories above it
support. Outside a request (the worker, the CLI's maintenance commands) there is no ceiling.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Any


class Sensitivity(StrEnum):
    PUBLIC = "public"
    INTERNAL = "internal"
    PRIVATE = "private"
    SECRET = "secret"  # noqa: S105 - a tier, not a password


TIERS: tuple[Sensitivity, ...] = tuple(Sensitivity)
DEFAULT = Sensitivity.INTERNAL
# The extractor's tier for a category whose facts are about the person (a write may always name its own).
CATEGORY_DEFAULTS: dict[str, Sensitivity] = {"personal_fact": Sensitivity.PRIVATE}

_ceiling: contextvars.ContextVar[Sensitivity | None] = contextvars.ContextVar("max_sensitivity", default=None)


def rank(tier: str | None) -> int:
    """A tier's place in the order public < internal < private < secret; a missing or unknown value is
    `internal` (memories written before tiers existed)."""
    try:
        return TIERS.index(Sensitivity(tier)) if tier else TIERS.index(DEFAULT)
    except ValueError:
        return TIERS.index(DEFAULT)


def of_category(category: str, given: str | None = None) -> Sensitivity:
    """The tier of a new memory: the one a write names, else its category's, else `internal`."""
    return Sensitivity(given) if given else CATEGORY_DEFAULTS.get(category, DEFAULT)


def allowed(ceiling: Sensitivity | None) -> tuple[Sensitivity, ...] | None:
    """The tiers a ceiling lets through; None when it restricts nothing (no ceiling, or `secret`)."""
    if ceiling is None or ceiling is Sensitivity.SECRET:
        return None
    return TIERS[: rank(ceiling) + 1]


def lower(*ceilings: Sensitivity | str | None) -> Sensitivity | None:
    """The lowest of the ceilings given (None: no ceiling)."""
    given = [Sensitivity(c) for c in ceilings if c is not None]
    return min(given, key=rank) if given else None


def current() -> Sensitivity | None:
    """The ceiling of the request being served (None: none)."""
    return _ceiling.get()


def set_current(ceiling: Sensitivity | None) -> contextvars.Token[Sensitivity | None]:
    return _ceiling.set(ceiling)


def reset_current(token: contextvars.Token[Sensitivity | None]) -> None:
    _ceiling.reset(token)


@contextmanager
def lowered(requested: Sensitivity | str | None) -> Iterator[Sensitivity | None]:
    """Serve a block under the current ceiling lowered to `requested` (a request's own `max_sensitivity`);
    a higher value changes nothing."""
    ceiling = lower(current(), requested)
    token = _ceiling.set(ceiling)
    try:
        yield ceiling
    finally:
        _ceiling.reset(token)


def visible(tier: Any, ceiling: Sensitivity | None = None) -> bool:
    """Whether a memory of `tier` may be shown under `ceiling` (default: the current one)."""
    ceiling = current() if ceiling is None else ceiling
    return ceiling is None or rank(tier) <= rank(ceiling)


def redact(value: Any, ceiling: Sensitivity | None = None) -> Any:
    """`value` (a task's result: JSON) without the objects whose `sensitivity` is above the ceiling (default: the
    current one); lists lose them, a field holding one becomes None."""
    ceiling = current() if ceiling is None else ceiling
    if ceiling is None:
        return value
    if isinstance(value, dict):
        if "sensitivity" in value and not visible(value["sensitivity"], ceiling):
            return None
        return {k: redact(v, ceiling) for k, v in value.items()}
    if isinstance(value, list):
        kept = (redact(v, ceiling) for v in value)
        return [v for v, raw in zip(kept, value, strict=True) if v is not None or raw is None]
    return value
