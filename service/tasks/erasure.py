"""Erasure in the task records: deleting a memory removes its content from the records of the tasks that wrote it
(`erase`, through `<queue>:mtasks:<memory id>`), and deleting all of a user's data scrubs every ended task of theirs
(`erase_user`)."""

from __future__ import annotations

import json

from service.core.kv import aw
from service.tasks.part import ENDED, RedisPart


class Erasure(RedisPart):
    async def erase(self, memory_ids: list[str]) -> int:
        """Deleting erases: the content of these memories leaves every task record that holds it (the
        results of the writes and updates that stored them). Returns the records changed."""
        async def run() -> int:
            changed = 0
            for mid in memory_ids:
                key = self.keys.memory_tasks(mid)
                for raw_tid in await aw(self._redis.smembers(key)):
                    tid = raw_tid.decode()
                    raw = await self._redis.get(self.keys.task(tid))
                    if raw is None:
                        continue
                    rec = json.loads(raw)
                    result = rec.get("result") if isinstance(rec.get("result"), dict) else {}
                    for m in result.get("memories") or []:
                        if isinstance(m, dict) and m.get("id") == mid:
                            m["content"] = None
                            m["deleted"] = True
                    rec.pop("job", None)
                    ttl = await self._redis.ttl(self.keys.task(tid))
                    await self._redis.set(self.keys.task(tid), json.dumps(rec),
                                          ex=ttl if ttl and ttl > 0 else self._settings.task_ttl_seconds)
                    changed += 1
                await self._redis.delete(key)
            return changed

        return await self._guard("erase", run())

    async def erase_user(self, user_id: str) -> int:
        """A delete of everything of the user: every ended task of theirs keeps its status and times but not what
        it held of the user's words (its job, its result, its error's text). Every task record is looked at (a
        SCAN: the user's index keeps only the newest USER_TASKS_KEPT). Returns the records changed."""
        async def scrub(keys: list[bytes]) -> int:
            n = 0
            keys = [k for k in keys if b":" not in k[len(self.keys.task_prefix):]]  # not the jobs' step caches
            for key, raw in zip(keys, await self._redis.mget(keys) if keys else [], strict=True):
                rec = json.loads(raw) if raw is not None and raw.startswith(b"{") else None
                if not isinstance(rec, dict) or rec.get("user_id") != user_id or rec.get("status") not in ENDED:
                    continue  # another user's, not ended, or not a status record (a job's step cache)
                rec.pop("job", None)
                rec["result"] = {"erased": True} if rec.get("result") is not None else None
                rec["error"] = "erased with the user's data" if rec.get("error") else None
                ttl = await self._redis.ttl(key)
                await self._redis.set(key, json.dumps(rec),
                                      ex=ttl if ttl and ttl > 0 else self._settings.task_ttl_seconds)
                n += 1
            return n

        changed, cursor = 0, 0
        for _ in range(10_000_000):  # bounded; each step guarded on its own
            cursor, keys = await self._guard("erase", self._redis.scan(cursor, match=self.keys.task_prefix + "*",
                                                                       count=1000))
            if keys:
                changed += await self._guard("erase", scrub(keys), scale=4)
            if not cursor:
                break
        return changed

