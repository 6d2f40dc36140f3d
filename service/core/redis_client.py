"""The service's Redis client (API, worker, key store, rate limits, idempotency all share one): plain or through
Sentinel, with ARQ's job serialiser (msgpack); `redis_settings` is what the ARQ worker itself connects with."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import msgpack
from arq.connections import ArqRedis, RedisSettings, create_pool
from redis.asyncio.sentinel import Sentinel
from redis.exceptions import RedisError

from service.core.errors import DependencyUnavailable
from service.core.settings import RedisQueueSettings


def job_serializer(obj: Any) -> bytes:
    # default=repr: ARQ also serialises results, and a failed job's result is an exception object.
    data: bytes = msgpack.packb(obj, use_bin_type=True, default=repr)
    return data


def job_deserializer(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False)


def redis_settings(settings: RedisQueueSettings) -> RedisSettings:
    """ARQ's connection settings: REDIS_URL, or the primary REDIS_SENTINELS name for REDIS_SENTINEL_MASTER (what
    `arq worker.WorkerSettings` connects with; this service's own clients come from `connect_redis`)."""
    rs = RedisSettings.from_dsn(settings.url)
    if settings.sentinels:
        rs.host = settings.sentinel_addresses
        rs.sentinel = True
        rs.sentinel_master = settings.sentinel_master
    rs.conn_timeout = max(1, int(settings.timeout_seconds))
    rs.conn_retries = 2
    return rs


def _sentinel_client(settings: RedisQueueSettings, queue: str) -> ArqRedis:
    """A client of the primary that REDIS_SENTINELS name: each new connection asks them where it is, so after a
    failover the next connection reaches the new primary (ARQ's own Sentinel path has no Sentinel password and no
    timeouts, hence this)."""
    conf = RedisSettings.from_dsn(settings.url)
    timeout = settings.timeout_seconds
    sentinel_kwargs: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    if settings.sentinel_password is not None:
        sentinel_kwargs["password"] = settings.sentinel_password.get_secret_value()
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        settings.sentinel_addresses, sentinel_kwargs=sentinel_kwargs, socket_connect_timeout=timeout,
        ssl=conf.ssl, db=conf.database, username=conf.username, password=conf.password)
    client = cast(ArqRedis, sentinel.master_for(settings.sentinel_master, redis_class=ArqRedis))
    client.job_serializer = job_serializer
    client.job_deserializer = job_deserializer
    client.default_queue_name = queue
    return client


async def connect_redis(settings: RedisQueueSettings, queue: str | None = None) -> ArqRedis:
    """The service's Redis client (API, worker, key store, rate limits, idempotency all share it); `queue`: the
    ARQ queue `enqueue_job` defaults to (ARQ_QUEUE_NAME)."""
    queue = queue or settings.queue_name
    try:
        if not settings.sentinels:
            return await create_pool(redis_settings(settings), job_serializer=job_serializer,
                                     job_deserializer=job_deserializer, default_queue_name=queue)
        client = _sentinel_client(settings, queue)
        for attempt in range(3):  # bounded, as create_pool's conn_retries
            try:
                await asyncio.wait_for(client.ping(), settings.timeout_seconds * 2)
                return client
            except (RedisError, OSError, TimeoutError):
                if attempt == 2:
                    await client.aclose()
                    raise
                await asyncio.sleep(1)
        raise AssertionError("unreachable")
    except (RedisError, OSError, TimeoutError) as exc:
        raise DependencyUnavailable(f"redis unreachable at {settings.safe_url}: {exc}") from exc
