"""The list convention (docs/api.md): every list answers `{items, next_cursor}` and takes `limit` (default
DEFAULT_PAGE_SIZE) and `cursor` (the previous page's `next_cursor`). `Page[T]` is the shape; a route's own page
model may subclass it to name its items. The exceptions, routes whose shape the seed's clients read, are listed in
SEED_SHAPES and in docs/api.md; there fields may be added, never renamed or removed."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel, Field

T = TypeVar("T")

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500

# (method, path) -> why its list keeps another shape. tests/unit/test_api_convention.py enforces the rest.
SEED_SHAPES: dict[tuple[str, str], str] = {
    ("GET", "/v1/memories"): "the v1 API: `{status, memories, next_cursor}`",
    ("GET", "/v1/categories"): "the v1 API: a JSON array of the 13 categories (a fixed set, never paged)",
    ("POST", "/v1/search"): "the v1 API: `{status, results}` (a ranking, not a page)",
}


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_cursor: str | None = Field(default=None, description="Pass it back as `cursor` for the next page; null at "
                                                              "the end")
