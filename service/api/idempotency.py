"""The `Idempotency-Key` header of the write routes.

The same key with the same request answers the task of the first one (202, same `task_id`); the same
key with another request is 422. Keys live IDEMPOTENCY_WINDOW_SECONDS and belong to the caller (the API
key, or the user named by a request without one), so two callers never see each other's keys.
Redis: `<queue>:idkey:<caller>:<sha256(key)>` -> {"fingerprint", "task_id"}.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import Header, HTTPException
from pydantic import BaseModel

from service.core.auth import Caller
from service.memory.intake import Intake
from service.schemas.memories import AcceptedResponse

IdempotencyKey = Annotated[
    str | None,
    Header(alias="Idempotency-Key", min_length=1, max_length=200,
           description="Retry-safe writes: the same key and request within IDEMPOTENCY_WINDOW_SECONDS "
                       "return the first task; the same key with another request is 422."),
]
A = Callable[[], Awaitable[AcceptedResponse]]
M = TypeVar("M", bound=BaseModel)


def _reused() -> HTTPException:
    # shaped like FastAPI's own 422 (a list of errors); service/api/errors.py gives it its code
    return HTTPException(422, [{"loc": ["header", "Idempotency-Key"], "type": "idempotency_key_reused",
                                "msg": "this Idempotency-Key was used with a different request; use a new key"}])


def _owner(caller: Caller, user_id: str | None) -> str:
    """Keys belong to the caller: the API key, or the user named by a request without one."""
    return caller.bucket if caller.key_id else f"user:{user_id or ''}"


def fingerprint(method: str, path: str, body: Any) -> str:
    canonical = json.dumps({"m": method, "p": path, "b": body}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


async def once(intake: Intake, caller: Caller, user_id: str | None, key: str | None, fp: str,
               submit: A) -> AcceptedResponse:
    if key is None:
        return await submit()
    owner = _owner(caller, user_id)
    keys = intake.tasks.idempotency

    def check(seen: dict[str, Any]) -> AcceptedResponse:
        if seen["fingerprint"] != fp:
            raise _reused()
        return AcceptedResponse(task_id=seen["task_id"], poll_url=f"/v1/memories/status/{seen['task_id']}")

    existing = await keys.seen(owner, key)
    if existing is not None:
        return check(existing)
    accepted = await submit()
    if not await keys.keep(owner, key, {"fingerprint": fp, "task_id": accepted.task_id}):
        raced = await keys.seen(owner, key)
        if raced is not None:
            return check(raced)
    return accepted


async def remembered(intake: Intake, caller: Caller, user_id: str | None, key: str | None, fp: str,
                     run: Callable[[], Awaitable[M]], model: type[M]) -> M:
    """`once` for the state-changing routes whose answer is not a task of the queue (a merge, a maintenance
    run's 202): the first answer is kept with the key, and a retry with the same key and request gets it back
    without running again. A concurrent retry of a request still running runs again (the operations it guards
    are idempotent by themselves: merges, runs that take a lock)."""
    if key is None:
        return await run()
    owner = _owner(caller, user_id)
    keys = intake.tasks.idempotency
    existing = await keys.seen(owner, key)
    if existing is not None:
        if existing["fingerprint"] != fp or "answer" not in existing:
            raise _reused()
        return model.model_validate(existing["answer"])
    answer = await run()
    await keys.keep(owner, key, {"fingerprint": fp, "answer": answer.model_dump(mode="json")})
    return answer
