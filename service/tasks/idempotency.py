"""The records of the `Idempotency-Key` header (service/api/idempotency.py decides what they mean): per caller and
key, `<queue>:idkey:<caller>:<sha256(key)>` -> {"fingerprint", "task_id" or "answer"}, kept
IDEMPOTENCY_WINDOW_SECONDS. The accept script's own pointer (`<queue>:idem:<request hash>`, queue.py) is another
thing: it makes a replayed identical request answer the same task, key or no key."""

from __future__ import annotations

import hashlib
from typing import Any

from service.core.keys import idempotency_record
from service.core.kv import RedisKV

WHAT = "idempotency key"


class IdempotencyKeys:
    def __init__(self, kv: RedisKV, window_s: int) -> None:
        self._kv = kv
        self._window_s = max(1, window_s)  # IDEMPOTENCY_WINDOW_SECONDS

    @staticmethod
    def _name(owner: str, key: str) -> str:
        return idempotency_record(owner, hashlib.sha256(key.encode()).hexdigest())

    async def seen(self, owner: str, key: str) -> dict[str, Any] | None:
        """What the first request with this key kept, if it is still kept."""
        seen: dict[str, Any] | None = await self._kv.get_json(self._name(owner, key), what=WHAT)
        return seen

    async def keep(self, owner: str, key: str, record: dict[str, Any]) -> bool:
        """Keep the first request's record for IDEMPOTENCY_WINDOW_SECONDS; False when another request with the same
        key kept its own first."""
        return await self._kv.set_json(self._name(owner, key), record, self._window_s, only_new=True, what=WHAT)
