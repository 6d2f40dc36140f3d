"""API keys and the caller of a request.

Keys look like `msk_<key id>_<secret>`. Only the key id and sha256(secret) are stored (the secret is
32 random bytes, so a fast hash is enough; comparison is constant-time). The store is Redis
(`<queue>:apikey:<key id>`, a JSON record, no TTL): the service already depends on it, every API
replica sees a revocation at once, and it survives restarts through its AOF (the compose stack and
`scripts/dev.sh` run Redis with `appendonly yes`). See docs/decisions.md ("API keys").

Who is calling (`caller_of`: a request's key, or none where AUTH_MODE=none allows it) and how much
(`rate_limit`: per key, or per client address, and kind) are decided here, on the app's clients; the API's
dependency (service/api/security.py), the console's session and the MCP server's transport all ask these.

The tenant of a request is the key's user (`Caller.user`): a user key acts only for its user; an admin
key acts for the `user_id` a request names; with `AUTH_MODE=none` (loopback only) a request without a
key acts for the `user_id` it names, and a key that is sent is still honoured and enforced.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog
from arq.connections import ArqRedis
from pydantic import BaseModel

from service.core.errors import DependencyUnavailable, Forbidden, NotFound, RateLimited, SchemaError, Unauthorized
from service.core.keys import Keys
from service.core.kv import aw, redis_guard
from service.core.sensitivity import Sensitivity, lower
from service.core.settings import RedisQueueSettings, Settings

log = structlog.get_logger(__name__)

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
        self._keys = Keys(settings.queue_name)

    async def create(self, user_id: str, name: str | None = None, admin: bool = False,
                     max_sensitivity: Sensitivity | str | None = None) -> tuple[ApiKey, str]:
        """A new key: its record, and the full key (shown once, never stored)."""
        key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        record = ApiKey(key_id=key_id, user_id=user_id, name=name, admin=admin,
                        created_at=datetime.now(UTC).isoformat(), secret_sha256=_digest(secret),
                        max_sensitivity=Sensitivity(max_sensitivity) if max_sensitivity else None)
        await redis_guard(self._settings, "api keys",
                          self._redis.set(self._keys.api_key(key_id), record.model_dump_json()))
        return record, f"{KEY_PREFIX}_{key_id}_{secret}"

    async def get(self, key_id: str) -> ApiKey | None:
        raw = await redis_guard(self._settings, "api keys", self._redis.get(self._keys.api_key(key_id)))
        return ApiKey.model_validate_json(raw) if raw else None

    async def list(self, user_id: str | None = None) -> list[ApiKey]:
        out: list[ApiKey] = []
        cursor = 0
        for _ in range(100_000):  # bounded: one SCAN page per round
            pattern = self._keys.api_key_prefix + "*"
            cursor, keys = await redis_guard(self._settings, "api keys",
                                             aw(self._redis.scan(cursor=cursor, match=pattern, count=500)))
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
                              self._redis.set(self._keys.api_key(key_id), record.model_dump_json()))
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


class Clients(Protocol):
    """What the access checks use of the app's clients (service/deps.py `Deps` is one)."""

    settings: Settings
    redis: ArqRedis


WRITE_METHODS = frozenset({"PUT", "DELETE", "PATCH"})
# POST routes that are reads (everything else posted is a write)
READ_POSTS = frozenset({"/v1/search", "/v1/graph/search", "/v1/graph/query"})


def api_key_of(headers: Any) -> str | None:
    auth = headers.get("authorization")
    if auth:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return str(token.strip())
    key = headers.get("x-api-key")
    return str(key).strip() if key else None


async def caller_of(clients: Clients, headers: Any) -> Caller:
    """The caller these headers authenticate. A key that is sent is always verified."""
    token = api_key_of(headers)
    if token is None:
        if clients.settings.resolved_auth_mode == "keys":
            raise Unauthorized("an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'")
        return Caller(default_user=clients.settings.service.default_user_id or None)
    record = await ApiKeyStore(clients.redis, clients.settings.redis).verify(token)
    return Caller(key_id=record.key_id, key_user=record.user_id, admin=record.admin,
                  max_sensitivity=record.max_sensitivity)


def is_write(method: str, path: str) -> bool:
    return method in WRITE_METHODS or (method == "POST" and path not in READ_POSTS)


async def rate_limit(clients: Clients, limiter: RateLimiter, caller: Caller, method: str, path: str,
                     client_host: str | None) -> None:
    """A fixed one-minute window per key (or client address) and kind, counted in Redis (RateLimiter)."""
    kind = "writes" if is_write(method, path) else "reads"
    limit = (clients.settings.access.rate_limit_writes_per_minute if kind == "writes"
             else clients.settings.access.rate_limit_reads_per_minute)
    if limit <= 0:
        return
    who = caller.bucket if caller.key_id else f"ip:{client_host or 'unknown'}"
    await limiter.check(clients, kind, who, limit)


class RateLimiter:
    """Fixed one-minute windows in Redis, counted in chunks. A process reserves `chunk_for(limit)` requests of a
    window at once (one INCRBY) and spends them locally, so a busy client costs one Redis round trip per chunk
    instead of one per request (round trips are a large share of the accepting loop's time, docs/benchmarks.md). The
    window's counter in Redis is what every process has reserved: a limit is never exceeded, and it is reached
    early by at most what the processes reserved and did not spend (under 1% of the limit per process; limits
    under 200 a minute are counted one by one)."""

    def __init__(self) -> None:
        self._left: dict[str, int] = {}  # window key -> requests reserved in Redis and not spent yet
        self._window = -1

    @staticmethod
    def chunk_for(limit: int) -> int:
        return max(1, min(32, limit // 200))

    async def check(self, clients: Clients, kind: str, who: str, limit: int) -> None:
        now = time.time()
        window = int(now // 60)
        if window != self._window:  # what was reserved for a past window is of no use
            self._left.clear()
            self._window = window
        key = Keys(clients.settings.redis.queue_name).rate(kind, who, window)
        if self._left.get(key, 0) > 0:
            self._left[key] -= 1
            return
        chunk = self.chunk_for(limit)

        async def reserve() -> int:
            pipe = clients.redis.pipeline(transaction=True)
            pipe.incrby(key, chunk)
            pipe.expire(key, 120)
            n, _ = await pipe.execute()
            return int(n)

        try:
            reserved = await redis_guard(clients.settings.redis, "rate limit", reserve())
        except DependencyUnavailable as exc:  # fail open: reads need no Redis, and a write answers 503 itself
            log.warning("rate_limit_unavailable", error=str(exc)[:200])
            return
        granted = max(0, min(chunk, limit - (reserved - chunk)))  # of the units reserved-chunk+1 .. reserved
        if granted == 0:
            retry_after = max(1, int((window + 1) * 60 - now) + 1)
            raise RateLimited(f"rate limit of {limit} {kind} per minute reached "
                              f"(RATE_LIMIT_{kind.upper()}_PER_MINUTE); retry after {retry_after} s", retry_after)
        if window == self._window:
            self._left[key] = self._left.get(key, 0) + granted - 1  # this request spends one
