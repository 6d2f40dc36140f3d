"""Rules both sides of the memory service apply: the content bounds, a memory's owner check and the listing
filter (the API-side intake, the worker-side writer and the reads all use them)."""

from __future__ import annotations

from typing import Protocol

from service.core.domain import ListOrder, Memory, Scope, check_category
from service.core.errors import DomainError, NotFound, PayloadTooLarge
from service.core.settings import ServiceSettings
from service.stores.vector import MemoryFilter


class StoredMemories(Protocol):
    """What the memory service reads of the vector store: memories by id, and pages of a filter."""

    async def get(self, ids: list[str]) -> list[Memory]: ...

    async def scroll(
        self, flt: MemoryFilter, limit: int, cursor: str | None = None, order: ListOrder = ListOrder.ID
    ) -> tuple[list[Memory], str | None]: ...


def check_content(service: ServiceSettings, content: str) -> str:
    if not content.strip():
        raise DomainError("content is empty")
    limit = service.max_content_chars
    if len(content) > limit:
        raise PayloadTooLarge(f"content has {len(content)} characters; the limit is {limit} (MAX_CONTENT_CHARS)")
    return content


async def scroll_all(vectors: StoredMemories, flt: MemoryFilter, pages: int = 100) -> list[Memory]:
    """Every memory the filter selects, 500 a page, at most `pages` pages (bounded)."""
    found: list[Memory] = []
    cursor: str | None = None
    for _ in range(pages):
        page, cursor = await vectors.scroll(flt, 500, cursor)
        found += page
        if cursor is None:
            break
    return found


async def existing(vectors: StoredMemories, ids: list[str], user_id: str | None) -> list[Memory]:
    """The memories of `ids` in that order; NotFound names the first that is missing or (with `user_id`)
    belongs to another user."""
    found = {m.id: m for m in await vectors.get(ids)}
    missing = [i for i in ids if i not in found or (user_id is not None and found[i].user_id != user_id)]
    if missing:
        raise NotFound(f"unknown memory id '{missing[0]}'")
    return [found[i] for i in ids]


def list_filter(
    user_id: str,
    scope: str | None,
    category: str | None,
    project_id: str | None,
    agent_id: str | None,
    *,
    all_scopes: bool,
) -> MemoryFilter:
    """Listing filter. Without scope: with project_id -> global + that project; without
    project_id -> every memory of the user (all_scopes)."""
    if category is not None:
        check_category(category)
    scope_value = Scope(scope) if scope else None
    if scope_value is None and project_id is None and all_scopes:
        # MemoryFilter's no-scope rule is "global only"; a listing of everything asks per scope.
        return MemoryFilter(user_id=user_id, categories=(category,) if category else None, agent_id=agent_id,
                            all_scopes=True)
    return MemoryFilter(
        user_id=user_id,
        project_id=project_id,
        scope=scope_value,
        categories=(category,) if category else None,
        agent_id=agent_id,
    )
