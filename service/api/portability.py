"""Export a user's memories as NDJSON (streamed) and import such a file (through the queue: 202 + task id)."""

from __future__ import annotations

import hashlib
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from service import routes
from service.api.declared import on
from service.api.deps import ExporterDep, IntakeDep
from service.api.idempotency import IdempotencyKey, fingerprint, once
from service.api.params import IdQuery, OptionalUserQuery
from service.api.security import CallerDep
from service.schemas.memories import AcceptedResponse

router = APIRouter(prefix="/v1", tags=["portability"])


@on(router, routes.EXPORT, response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}}, "description": "One JSON object per line"}})
async def export(
    exporter: ExporterDep, caller: CallerDep, user_id: OptionalUserQuery = None, project_id: IdQuery = None,
    include_vectors: Annotated[bool, Query(description="Also write each memory's vector")] = False,
) -> StreamingResponse:
    """The user's memories (with `project_id`: the global ones and that project's), entities with aliases
    and facts with their validity history, as NDJSON, page by page (docs/portability.md)."""
    user = caller.user(user_id)
    await exporter.vectors.ping()  # fail before the 200 starts, not halfway through the stream
    filename = f"memories-{user}{'-' + project_id if project_id else ''}.ndjson"
    return StreamingResponse(exporter.export(user, project_id, include_vectors), media_type="application/x-ndjson",
                             headers={"Content-Disposition": f'attachment; filename="{filename}"'})


@on(router, routes.IMPORT, openapi_extra={"requestBody": {
    "required": True, "description": "An export file: NDJSON, or gzip of it (any content type; gzip is recognised by "
                                     "its magic bytes)",
    "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}})
async def import_file(request: Request, intake: IntakeDep, caller: CallerDep,
                      idempotency_key: IdempotencyKey = None) -> AcceptedResponse:
    """An export file (NDJSON, or gzip-compressed NDJSON) as the body, up to MAX_IMPORT_BYTES. It is
    imported by the worker for the user its header names (a user key may import only its own user's file);
    the task result counts what was imported and lists rejected lines with their reasons. Ids are kept, so
    importing the same file twice changes nothing."""
    body = await request.body()
    user = caller.user(intake.import_owner(body))
    fp = fingerprint("POST", "/v1/import", hashlib.sha256(body).hexdigest())
    return await once(intake, caller, user, idempotency_key, fp, lambda: intake.submit_import(body, user))
