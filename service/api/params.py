"""Path, query and header parameter types the routers share (one definition each)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from service.core.domain import ID_PATTERN, ListOrder
from service.schemas.page import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE

OptionalUserQuery = Annotated[
    str | None,
    Query(min_length=1, max_length=128, pattern=ID_PATTERN,
          description="The user the request acts for. With a user API key it may be omitted (the key's user); "
                      "naming another user is 403. Required with an admin key or AUTH_MODE=none."),
]
OwnerQuery = Annotated[
    str | None,
    Query(min_length=1, max_length=128, pattern=ID_PATTERN,
          description="When given, the memory must belong to this user (else 404). With a user API key it may "
                      "be omitted (the key's user); naming another user is 403."),
]
IdQuery = Annotated[str | None, Query(min_length=1, max_length=128, pattern=ID_PATTERN)]
SessionQuery = IdQuery  # a conversation's id (GET /v1/runs, /v1/context)
GraphProjectQuery = Annotated[
    str | None,
    Query(min_length=1, max_length=128, pattern=ID_PATTERN,
          description="With project_id: global + that project's graph; without: every group of the user"),
]
MemoryId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9-]+$")]
TaskId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
RunId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
ProjectPath = Annotated[str, Path(min_length=1, max_length=128, pattern=ID_PATTERN)]
PageLimit = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description=f"Page size (default {DEFAULT_PAGE_SIZE})")]
PAGE = DEFAULT_PAGE_SIZE  # every list's default `limit` (docs/api.md): `limit: PageLimit = PAGE`
Cursor = Annotated[str | None, Query(max_length=64)]
OrderQuery = Annotated[
    ListOrder | None,
    Query(description="newest (created_at, newest first: the default), oldest, or id. Equal created_at go by id. "
                      "Without it, a cursor goes on in the order of the page that gave it."),
]
EntityId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9-]+$")]
EntityQuery = Annotated[str | None, Query(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9-]+$")]
TraceId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9-]+$")]
PairCursor = Annotated[str | None, Query(max_length=200, description="next_cursor of the previous page")]
