"""API keys and the caller of a request.

Keys look like `msk_<key id>_<secret>`. Only the key id and sha256(secret) are stored (the secret is
32 random bytes, so a fast hash is enough; comparison is constant-time). The store is Redis
(`<queue>:apikey:<key id>`, a JSON record, no TTL): the service already depends on it, every API
replica sees a revocation at once, and it survives restarts through its AOF (the compose stack and
`scripts/dev.sh` run Redis with `appendonly yes`). See docs/decisions.md ("API keys").

The tenant of a request is the key's user (`Caller.user`): a user key acts only for its user; an admin
key acts for the `user_id` a request names; with `AUTH_MODE=none` (loopback only) a request without a
key acts for the `user_id` it names, and a key that is sent is still honoured and enforced.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from arq.connections import ArqRedis
from pydantic import BaseModel

from service.core.errors import Forbidden, NotFound, SchemaError, Unauthorized
from service.core.kv import aw, redis_guard
from service.core.sensitivity import Sensitivity, lower
from service.core.settings import RedisQueueSettings

KEY_PREFIX = "msk"


class ApiKey(BaseModel):
    key_id: str
    user_id: str
    name: str | None = None
    admin: bool = False
    created_at: str
    revoked_at: str | None = None
    secret_sha256: str
    max_sensitivity: Sensitivity | None = None  # the highest tier its reads return; None: every tier


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_key(token: str) -> tuple[str, str] | None:
    """(key id, secret) of a well-formed key, else None."""
    parts = token.strip().split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX or not parts[1].isalnum() or len(parts[2]) < 16:
        return None
    return parts[1], parts[2]


class ApiKeyStore:
    def __init__(self, redis: ArqRedis, settings: RedisQueueSettings) -> None:
        self._redis = redis
        self._settings = settings
        self._prefix = f"{settings.queue_name}:apikey:"

    async def create(self, user_id: str, name: str | None = None, admin: bool = False,
                     max_sensitivity: Sensitivity | str | None = None) -> tuple[ApiKey, str]:
        """A new key: its record, and the full key (shown once, never stored)."""
        key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        record = ApiKey(key_id=key_id, user_id=user_id, name=name, admin=admin,
                        created_at=datetime.now(UTC).isoformat(), secret_sha256=_digest(secret),
                        max_sensitivity=Sensitivity(max_sensitivity) if max_sensitivity else None)
        await redis_guard(self._settings, "api keys", self._redis.set(self._prefix + key_id, record.model_dump_json()))
        return record, f"{KEY_PREFIX}_{key_id}_{secret}"

    async def get(self, key_id: str) -> ApiKey | None:
        raw = await redis_guard(self._settings, "api keys", self._redis.get(self._prefix + key_id))
        return ApiKey.model_validate_json(raw) if raw else None

    async def list(self, user_id: str | None = None) -> list[ApiKey]:
        out: list[ApiKey] = []
        cursor = 0
        for _ in range(100_000):  # bounded: one SCAN page per round
            cursor, keys = await redis_guard(self._settings, "api keys",
                                             aw(self._redis.scan(cursor=cursor, match=self._prefix + "*", count=500)))
            if keys:
                raws = await redis_guard(self._settings, "api keys", aw(self._redis.mget(keys)))
                out += [ApiKey.model_validate_json(r) for r in raws if r]
            if cursor == 0:
                break
        return sorted((k for k in out if user_id is None or k.user_id == user_id), key=lambda k: k.created_at)

    async def revoke(self, key_id: str) -> ApiKey:
        record = await self.get(key_id)
        if record is None:
            raise NotFound(f"unknown key id '{key_id}'")
        if record.revoked_at is None:
            record.revoked_at = datetime.now(UTC).isoformat()
            await redis_guard(self._settings, "api keys",
                              self._redis.set(self._prefix + key_id, record.model_dump_json()))
        return record

    async def verify(self, token: str) -> ApiKey:
        """The live key this token is, or Unauthorized (malformed, unknown, wrong secret, revoked)."""
        parsed = parse_key(token)
        if parsed is None:
            raise Unauthorized("malformed API key (expected msk_<key id>_<secret>)")
        record = await self.get(parsed[0])
        if record is None or not hmac.compare_digest(record.secret_sha256, _digest(parsed[1])):
            raise Unauthorized("invalid API key")
        if record.revoked_at is not None:
            raise Unauthorized("this API key was revoked")
        return record


@dataclass(frozen=True)
class Caller:
    """Who is calling: a user key, an admin key, or nobody (AUTH_MODE=none without a key)."""

    key_id: str | None = None
    key_user: str | None = None
    admin: bool = False
    default_user: str | None = None  # DEFAULT_USER_ID: the user of a request naming none under AUTH_MODE=none
    max_sensitivity: Sensitivity | None = None  # the key's ceiling (service/core/sensitivity.py); None: every tier

    def ceiling(self, requested: Sensitivity | str | None = None) -> Sensitivity | None:
        """The ceiling of a read that asks for `requested`: it may lower the key's, never raise it."""
        return lower(self.max_sensitivity, requested)

    @property
    def anonymous(self) -> bool:
        return self.key_id is None

    @property
    def bucket(self) -> str:
        return f"key:{self.key_id}" if self.key_id else "anon"

    def user(self, requested: str | None) -> str:
        """The tenant of a request that names `requested` (or nobody)."""
        if self.key_user is not None and not self.admin:
            if requested is not None and requested != self.key_user:
                raise Forbidden("this API key acts only for its own user; the request names another user_id")
            return self.key_user
        if requested is None and self.key_id is None and self.default_user:
            return self.default_user
        if requested is None:
            who = "an admin key" if self.admin else "a request without an API key (AUTH_MODE=none)"
            raise SchemaError(f"user_id is required: {who} acts for the user_id it names", ("user_id",))
        return requested

    def user_filter(self, requested: str | None) -> str | None:
        """For by-id routes: the owner the resource must have (None = any, for admins and AUTH_MODE=none)."""
        if self.key_user is not None and not self.admin:
            return self.user(requested)
        return requested

    def sees(self, owner: str | None) -> bool:
        return self.admin or self.key_user is None or owner == self.key_user

    def require_admin(self, what: str) -> None:
        if self.key_id is not None and not self.admin:
            raise Forbidden(f"{what} needs an admin key")


def describe(record: ApiKey) -> dict[str, Any]:
    """A key as `keys list` prints it (never the hash)."""
    out: dict[str, Any] = json.loads(record.model_dump_json(exclude={"secret_sha256"}))
    return out
