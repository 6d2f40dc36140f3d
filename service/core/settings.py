"""The one settings object, in groups. Built once at start (API lifespan, worker startup, CLI) and passed down: a
component receives the group (or the few groups) it uses, `settings.neo4j`, `settings.redis`, ...

No other module reads the environment. Each group's field reads the environment variable its alias names
(`Neo4jSettings.uri` <- NEO4J_URI), from the environment or `.env` (the environment wins), case-insensitively.
An empty value counts as unset, for every setting (`GOOGLE_API_KEY=` = no key). A process entry builds the object
with `load_settings()`, which turns an invalid setting into one line per problem (`NAME: rule (got value)`) and exit
status 1, not a traceback.

Keyword form: `Settings(neo4j_uri=..., arq_max_jobs=3)` sets NEO4J_URI and ARQ_MAX_JOBS (each environment variable's
lower-case name); a group can also be given whole, `Settings(neo4j=Neo4jSettings(uri=...))`.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from dotenv import dotenv_values
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings.sources import DotEnvSettingsSource

from service.core.embedding_models import Calibration, calibration

EmbedderName = Literal["local", "gemini", "hash", "openai"]


def is_loopback(host: str) -> bool:
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def mask_url(url: str) -> str:
    """`scheme://user:secret@host` -> `scheme://user:***@host` (any URL setting in a message or log)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}:" if parts.username else ":"
    return urlunsplit(parts._replace(netloc=f"{user}***@{netloc}"))


def _env(name: str, default: Any, **rules: Any) -> Any:
    """A field read from the environment variable `name` (its alias), with its default and rules."""
    return Field(default, validation_alias=name, **rules)


def _comma_list(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class Group(BaseModel):
    """A group of settings: built from environment names (the aliases) or from its own field names."""

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True, extra="forbid")


class GeminiSettings(Group):
    """Gemini: extraction and summaries, and embeddings with EMBEDDER=gemini."""

    api_key: SecretStr | None = _env("GOOGLE_API_KEY", None)
    llm_model: str = _env("GEMINI_LLM_MODEL", "gemini-3-flash-preview")
    llm_fallback_model: str = _env("GEMINI_LLM_FALLBACK_MODEL", "gemini-2.5-flash")
    embedder_model: str = _env("GEMINI_EMBEDDER_MODEL", "gemini-embedding-001")
    embedding_dim: int = _env("GEMINI_EMBEDDING_DIM", 768, ge=8, le=3072)
    timeout_seconds: float = _env("GEMINI_TIMEOUT_SECONDS", 60.0, gt=0)
    # Only for proxies and tests (a local fake of the Gemini API); unset = Google's endpoint.
    base_url: str | None = _env("GEMINI_BASE_URL", None)


class LlmSettings(Group):
    """The LLM provider (docs/llm.md)."""

    # Who extracts facts and writes summaries: gemini, openai (any OpenAI-compatible server: OpenAI, OpenRouter,
    # Ollama, vLLM, llama.cpp's server, LM Studio) or offline (rules). Unset = gemini with GOOGLE_API_KEY, else offline.
    provider: Literal["gemini", "openai", "offline"] | None = _env("LLM_PROVIDER", None)
    # The OpenAI-compatible server, e.g. http://127.0.0.1:11434/v1 (Ollama); unset = https://api.openai.com/v1.
    openai_base_url: str | None = _env("OPENAI_BASE_URL", None)
    openai_api_key: SecretStr | None = _env("OPENAI_API_KEY", None)  # optional for local servers
    model: str | None = _env("LLM_MODEL", None, min_length=1, max_length=200)  # LLM_PROVIDER=openai: the model
    fallback_model: str | None = _env("LLM_FALLBACK_MODEL", None, min_length=1, max_length=200)  # on 429/5xx
    timeout_seconds: float = _env("LLM_TIMEOUT_SECONDS", 60.0, gt=0)
    concurrency: int = _env("LLM_CONCURRENCY", 4, ge=1, le=256)  # requests in flight to the server, per process
    # the cap on each answer (a small model looping inside a JSON string ends truncated, repaired or offline)
    max_output_tokens: int = _env("LLM_MAX_OUTPUT_TOKENS", 4096, ge=64, le=131_072)
    # EMBEDDER=openai: the server's embeddings model and the dimension of its vectors (checked at start)
    openai_embedding_model: str | None = _env("OPENAI_EMBEDDING_MODEL", None, min_length=1, max_length=200)
    openai_embedding_dim: int | None = _env("OPENAI_EMBEDDING_DIM", None, ge=8, le=8192)

    @property
    def reaches_openai(self) -> bool:
        return self.openai_base_url is not None or self.openai_api_key is not None

    @model_validator(mode="after")
    def _check_openai(self) -> LlmSettings:
        """LLM_PROVIDER=openai without what it needs, or a base URL that is no URL: one line that names them."""
        if self.provider == "openai":
            if self.model is None:
                raise ValueError("LLM_PROVIDER=openai needs LLM_MODEL (the model the server serves; docs/llm.md)")
            if not self.reaches_openai:
                raise ValueError("LLM_PROVIDER=openai needs OPENAI_BASE_URL (a local server) or OPENAI_API_KEY "
                                 "(api.openai.com)")
        url = self.openai_base_url
        if url is not None and urlsplit(url).scheme not in ("http", "https"):
            raise ValueError("OPENAI_BASE_URL must be an http(s) URL, e.g. http://127.0.0.1:11434/v1 "
                             f"(got {mask_url(url)[:80]})")
        return self


class Neo4jSettings(Group):
    uri: str = _env("NEO4J_URI", "neo4j://127.0.0.1:7687")
    user: str = _env("NEO4J_USER", "neo4j")
    password: SecretStr | None = _env("NEO4J_PASSWORD", None)
    database: str = _env("NEO4J_DATABASE", "memory")
    timeout_seconds: float = _env("GRAPH_TIMEOUT_SECONDS", 5.0, gt=0)


class SearchSettings(Group):
    """Search (docs/retrieval.md)."""

    candidates: int = _env("SEARCH_CANDIDATES", 50, ge=1, le=500)  # each retriever's list length
    # The graph retriever proposes up to GRAPH_CANDIDATES memories (those mentioning the entities the query names,
    # or one relation away) and ranks them by the query without those names (docs/retrieval.md): cosine plus
    # GRAPH_ENTITY_WEIGHT x the graph score over the best, fused (RRF_K) with BM25 among them at GRAPH_LEXICAL_WEIGHT.
    graph_candidates: int = _env("GRAPH_CANDIDATES", 1000, ge=1, le=5000)
    # unset = the embedding model's calibrated value (Settings.calibration)
    graph_entity_weight: float | None = _env("GRAPH_ENTITY_WEIGHT", None, ge=0)
    graph_lexical_weight: float = _env("GRAPH_LEXICAL_WEIGHT", 0.5, ge=0)
    # A result found only by meaning whose cosine with the query is below this is marked `below_floor`; recall and a
    # context with a query leave it out. Unset = the embedding model's calibrated value (Settings.calibration)
    relevance_floor: float | None = _env("RELEVANCE_FLOOR", None, ge=-1, le=1)
    rrf_k: float = _env("RRF_K", 5.0, gt=0)
    weight_dense: float = _env("SEARCH_WEIGHT_DENSE", 1.0, ge=0)
    weight_lexical: float = _env("SEARCH_WEIGHT_LEXICAL", 1.5, ge=0)
    weight_graph: float = _env("SEARCH_WEIGHT_GRAPH", 3.0, ge=0)
    weight_time: float = _env("SEARCH_WEIGHT_TIME", 1.0, ge=0)
    # conversations: a message's relative time ("yesterday", "last Saturday") resolved against its timestamp into
    # its memories' occurred_at (service/memory/windows.py: anchored_time)
    time_anchoring: bool = _env("TIME_ANCHORING", True)
    query_cache_size: int = _env("QUERY_CACHE_SIZE", 2048, ge=0)  # query embeddings kept per process (0 = off)
    # The session context's order (service/search/context.py): recency's half-life in days
    context_recency_days: float = _env("CONTEXT_RECENCY_DAYS", 30.0, gt=0)


class RedisQueueSettings(Group):
    """Redis and the ARQ queue on it."""

    url: str = _env("REDIS_URL", "redis://localhost:6379")
    timeout_seconds: float = _env("REDIS_TIMEOUT_SECONDS", 1.5, gt=0, le=10)
    # Redis Sentinel (docs/deployment.md): host:port of each sentinel; set = the primary is the one these name for
    # REDIS_SENTINEL_MASTER, and REDIS_URL gives only the database, user and password of the primary.
    sentinels: list[str] = _env("REDIS_SENTINELS", [])
    sentinel_master: str = _env("REDIS_SENTINEL_MASTER", "mymaster", min_length=1, max_length=200)
    sentinel_password: SecretStr | None = _env("REDIS_SENTINEL_PASSWORD", None)
    # With REDIS_SENTINELS: a write is acknowledged (202) only once this many replicas hold it (Redis WAIT), so a
    # failover cannot lose it (docs/decisions.md "Acknowledged writes and failover"); 0 = answer at once.
    wait_replicas: int = _env("REDIS_WAIT_REPLICAS", 1, ge=0, le=5)
    # Queues of user shards (service/tasks/shards.py): a user's jobs all go to the queue of shard
    # sha256(user_id) mod WORKER_SHARDS, consumed by `python -m worker --shard K`; 1 = one queue (ARQ_QUEUE_NAME).
    worker_shards: int = _env("WORKER_SHARDS", 1, ge=1, le=1024)
    queue_name: str = _env("ARQ_QUEUE_NAME", "memory-platform:queue")
    # Attempts of a job lost with its worker (killed mid-job, or the job gone from Redis) before its task fails, after
    # the interruptions forgiven (attempts = ARQ_MAX_RETRIES + 1). A dependency's timeout or outage is not counted here:
    # it is retried against WRITE_RETRY_BUDGET_SECONDS (docs/write-path.md "Slowness is not an outage").
    max_retries: int = _env("ARQ_MAX_RETRIES", 2, ge=0, le=20)
    job_timeout: int = _env("ARQ_JOB_TIMEOUT", 300, ge=1)
    # Jobs in flight at once. More of them wait together at the embedding and graph steps, which then run in
    # bigger batches, so a larger number drains single writes faster (docs/benchmarks.md, "Jobs in flight").
    max_jobs: int = _env("ARQ_MAX_JOBS", 64, ge=1, le=256)
    # How often an idle worker looks for jobs; ARQ's 0.5 s default caps a worker at max_jobs/0.5 jobs/s.
    poll_delay_seconds: float = _env("ARQ_POLL_DELAY_SECONDS", 0.05, gt=0, le=5)
    task_ttl_seconds: int = _env("TASK_TTL_SECONDS", 7 * 24 * 3600, ge=60)
    # A running job's lease, refreshed every third of it: a job whose lease lapsed belongs to a dead worker, and the
    # reaper releases it once its task is twice this old (docs/write-path.md). The fault tests shorten it.
    task_lease_seconds: int = _env("TASK_LEASE_SECONDS", 15, ge=2, le=600)
    idempotency_window_seconds: int = _env("IDEMPOTENCY_WINDOW_SECONDS", 600, ge=0)

    @field_validator("sentinels", mode="before")
    @classmethod
    def _parse_sentinels(cls, value: object) -> object:
        value = _comma_list(value)
        if isinstance(value, list):
            for item in value:
                host, sep, port = str(item).rpartition(":")
                if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                    raise ValueError("REDIS_SENTINELS must be host:port pairs separated by commas, e.g. "
                                     f"10.0.0.5:26379 ({item!r} is not)")
        return value

    @property
    def max_tries(self) -> int:
        """Attempts per job lost with its worker, the first included (the reaper's limit)."""
        return self.max_retries + 1

    @property
    def sentinel_addresses(self) -> list[tuple[str, int]]:
        """REDIS_SENTINELS as (host, port) pairs (empty: REDIS_URL names the primary itself)."""
        return [(host.strip("[]"), int(port)) for host, _, port in (s.rpartition(":") for s in self.sentinels)]

    @property
    def safe_url(self) -> str:
        """REDIS_URL with any password masked: the only form that goes into errors and logs (with Sentinel: the
        sentinels and the primary's name)."""
        if self.sentinels:
            return f"sentinel {self.sentinel_master} via {','.join(self.sentinels)}"
        return mask_url(self.url)


class WritePathSettings(Group):
    """Write-path integrity (outbox, reconciler, reaper; docs/write-path.md)."""

    # How often the outbox is drained and lost tasks are reaped (seconds; a divisor of 60).
    reconcile_interval_seconds: int = _env("RECONCILE_INTERVAL_SECONDS", 60, ge=1, le=60)
    # Outbox entries and pending tasks younger than this are left to the job that made them.
    reconcile_grace_seconds: float = _env("RECONCILE_GRACE_SECONDS", 10.0, ge=0, le=3600)
    # The daily full Qdrant <-> Neo4j comparison (UTC hour); RECONCILE_CRON_ENABLED=false turns it off.
    reconcile_cron_hour: int = _env("RECONCILE_CRON_HOUR", 3, ge=0, le=23)
    reconcile_cron_enabled: bool = _env("RECONCILE_CRON_ENABLED", True)
    # The daily rebuild of every user's entity communities (RECONCILE_CRON_HOUR, minute 40; docs/graph.md).
    communities_cron_enabled: bool = _env("COMMUNITIES_CRON_ENABLED", True)
    # How long an accepted write keeps being retried while a dependency (Redis, Neo4j, the vector store, the LLM, the
    # embedder) times out or refuses connections, counted from its first such failure: slowness delays a write, it
    # does not end it. Only the data's own faults (bad input, a model answer that cannot be repaired) fail at once.
    retry_budget_seconds: float = _env("WRITE_RETRY_BUDGET_SECONDS", 1800.0, ge=1, le=30 * 86400)
    # The first wait between two attempts of such a write; it doubles per attempt, up to a minute.
    retry_backoff_seconds: float = _env("WRITE_RETRY_BACKOFF_SECONDS", 2.0, ge=0.1, le=60)
    # /health says "degraded" (200: slow is not down) when an event loop of the API or a worker lagged over this many
    # seconds in each sample of the last LAG_WINDOW_S, or when the oldest task not ended is older than
    # QUEUE_AGE_DEGRADED_SECONDS.
    loop_lag_degraded_seconds: float = _env("LOOP_LAG_DEGRADED_SECONDS", 1.0, gt=0, le=600)
    queue_age_degraded_seconds: float = _env("QUEUE_AGE_DEGRADED_SECONDS", 600.0, gt=0)

    @field_validator("reconcile_interval_seconds")
    @classmethod
    def _check_interval(cls, value: int) -> int:
        if 60 % value:
            raise ValueError("RECONCILE_INTERVAL_SECONDS must divide 60 (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30 or 60)")
        return value


class QdrantSettings(Group):
    url: str | None = _env("QDRANT_URL", None)
    api_key: SecretStr | None = _env("QDRANT_API_KEY", None)
    path: Path | None = _env("QDRANT_PATH", None)  # default: <DATA_DIR>/qdrant (Settings.resolved_qdrant_path)
    # Without QDRANT_URL: false keeps the vectors in memory only (qdrant-client's in-process mode; gone at exit,
    # and the embedded worker runs in the API process), as the v1 design's QDRANT_ON_DISK. Default true: Qdrant Edge
    on_disk: bool = _env("QDRANT_ON_DISK", True)
    collection: str = _env("QDRANT_COLLECTION", "memory_platform")
    # Qdrant Edge: build the HNSW index and vacuum deleted points (in a child process) once this many points were
    # written or deleted since the last build (0 = never)
    optimize_min_unindexed: int = _env("OPTIMIZE_MIN_UNINDEXED", 20_000, ge=0)


class EmbeddingSettings(Group):
    embedder: EmbedderName = _env("EMBEDDER", "local")
    batch_size: int = _env("EMBEDDING_BATCH_SIZE", 64, ge=1, le=1024)
    # The local embedder (docs/decisions.md "The local embedder"): a model of the registry (core/embedding_models.py) on
    # ONNX Runtime, e5-small-v2 (int8) by default, or all-MiniLM-L6-v2; its files come from
    # `python -m service models fetch`. EMBEDDER_MODEL_DIR = any sentence-transformers-style ONNX directory instead
    # (model.onnx + tokenizer.json), recorded in the stores as EMBEDDER_MODEL_ID (default: the directory's name).
    model: Literal["e5-small-v2", "all-MiniLM-L6-v2"] = _env("EMBEDDER_MODEL", "e5-small-v2")
    model_dir: Path | None = _env("EMBEDDER_MODEL_DIR", None)
    model_id: str | None = _env("EMBEDDER_MODEL_ID", None, min_length=1, max_length=200)
    threads: int = _env("EMBEDDER_THREADS", 0, ge=0, le=64)  # ONNX Runtime intra-op threads; 0 = this process's cores
    # where the built ONNX graph is kept; default <DATA_DIR>/models (Settings.resolved_model_cache_dir)
    cache_dir: Path | None = _env("MODEL_CACHE_DIR", None)
    # A vector store written by another embedder of the same dimension is refused at start; true = start anyway,
    # recording a re-embed to the configured one as under way (then run `python -m service reembed`).
    allow_change: bool = _env("ALLOW_EMBEDDER_CHANGE", False)
    # Where the write path runs the local embedder: "child" = a child process at a lower CPU priority (the API's
    # event loop keeps the CPU and the GIL while the worker drains), "inline" = threads of this process,
    # "auto" = child when the worker runs inside the API process (the embedded profile) with EMBEDDER=local.
    process: Literal["auto", "child", "inline"] = _env("EMBED_PROCESS", "inline")
    # How much lower the child's CPU priority is (Unix nice, 0-19): the accepting loop comes first.
    process_nice: int = _env("EMBED_PROCESS_NICE", 10, ge=0, le=19)

    @property
    def resolved_model_id(self) -> str:
        """The model id the configured embedder records (its calibration's key, service/core/embedding_models.py)."""
        if self.embedder != "local":
            return self.embedder
        if self.model_dir is not None:
            return self.model_id or self.model_dir.name
        return self.model


class WorkerSettings(Group):
    """Where the embedded profile's worker runs (the server profile's worker is its own process)."""

    # None = decide from the profile: in-process when Qdrant is embedded (no QDRANT_URL).
    embedded: bool | None = _env("EMBEDDED_WORKER", None)
    # "inline" = in the API process (one event loop and GIL for both), "child" = a child process that reaches the API
    # process's Qdrant Edge shard through a Unix socket (worker/child.py), so the accepting loop does not run jobs
    # (the default: it drains faster, docs/decisions.md).
    process: Literal["inline", "child"] = _env("WORKER_PROCESS", "child")
    # The worker child's CPU priority below the API process's (Unix nice, 0-19): accepting comes first.
    process_nice: int = _env("WORKER_PROCESS_NICE", 10, ge=0, le=19)
    # How many worker children (WORKER_PROCESS=child): child i consumes the shards k with k mod N = i (shard
    # i mod WORKER_SHARDS when there are fewer shards than children); all reach the API process's vector store.
    processes: int = _env("WORKER_PROCESSES", 1, ge=1, le=16)


class ServiceSettings(Group):
    host: str = _env("HOST", "127.0.0.1")
    port: int = _env("PORT", 8199, ge=1, le=65535)
    data_dir: Path = _env("DATA_DIR", Path("./data"))
    default_user_id: str = _env("DEFAULT_USER_ID", "default_user")
    max_content_chars: int = _env("MAX_CONTENT_CHARS", 8000, ge=1, le=100_000)
    max_conversation_chars: int = _env("MAX_CONVERSATION_CHARS", 200_000, ge=1, le=5_000_000)
    log_level: str = _env("LOG_LEVEL", "INFO")
    log_format: Literal["auto", "json", "console"] = _env("LOG_FORMAT", "auto")
    environment: Literal["development", "production"] = _env("ENVIRONMENT", "development")

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)


class AccessSettings(Group):
    """Access (docs/api.md, "Authentication and tenants") and request limits."""

    # keys = every route but /health and /v1/categories needs an API key; none = requests without a
    # key act as the user_id they name (allowed only on a loopback HOST). Unset: none on a loopback
    # HOST, keys otherwise (Settings.resolved_auth_mode).
    auth_mode: Literal["keys", "none"] | None = _env("AUTH_MODE", None)
    max_body_bytes: int = _env("MAX_BODY_BYTES", 1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    # conversations: every message is also kept verbatim, consecutive ones grouped into `interaction` memories of
    # at most this many messages (docs/retrieval.md: 2 retrieves best of 1, 2, 4)
    interaction_window_messages: int = _env("INTERACTION_WINDOW_MESSAGES", 2, ge=1, le=50)
    max_import_bytes: int = _env("MAX_IMPORT_BYTES", 64 * 1024 * 1024, ge=1024, le=512 * 1024 * 1024)  # POST /v1/import
    # Per API key (or per client address without a key), per minute; 0 = no limit.
    rate_limit_writes_per_minute: int = _env("RATE_LIMIT_WRITES_PER_MINUTE", 6000, ge=0)
    rate_limit_reads_per_minute: int = _env("RATE_LIMIT_READS_PER_MINUTE", 12000, ge=0)
    # Host headers the API answers (DNS rebinding); empty = localhost, 127.0.0.1, [::1] and HOST.
    allowed_hosts: list[str] = _env("ALLOWED_HOSTS", [])
    # Browser origins allowed by CORS; empty = CORS off.
    cors_origins: list[str] = _env("CORS_ORIGINS", [])

    @field_validator("allowed_hosts", "cors_origins", mode="before")
    @classmethod
    def _parse_list(cls, value: object) -> object:
        return _comma_list(value)


class ConsoleSettings(Group):
    """The web console (/ui, docs/console.md)."""

    # The key its session cookies are signed with (unset: a random key per process, so sessions end at a restart;
    # set it when several API processes serve the console), and how long a session lasts.
    session_secret: SecretStr | None = _env("UI_SESSION_SECRET", None)
    session_hours: int = _env("UI_SESSION_HOURS", 12, ge=1, le=24 * 30)


class McpSettings(Group):
    # http = the API also serves MCP (streamable HTTP) at /mcp/; stdio = only `python -m service.mcp`.
    transport: Literal["stdio", "http"] = _env("MCP_TRANSPORT", "stdio")
    # Where `python -m service.mcp` (stdio) finds the API; None = http://127.0.0.1:<PORT>.
    api_url: str | None = _env("MEMORY_API_URL", None)
    # The API key `python -m service.mcp` (stdio) sends to the API (needed when AUTH_MODE=keys).
    api_key: SecretStr | None = _env("MEMORY_API_KEY", None)
    # Tools beyond the eight every agent needs (docs/agents.md "Toolsets"): memory (remember_many, update_memory),
    # graph (facts, entities, duplicates, queries), runs (task runs), or all. Empty = the eight only.
    toolsets: list[Literal["memory", "graph", "runs", "all"]] = _env("MCP_TOOLSETS", [])

    @field_validator("toolsets", mode="before")
    @classmethod
    def _parse_toolsets(cls, value: object) -> object:
        return _comma_list(value)


class MetricsSettings(Group):
    """Metrics (Prometheus)."""

    # With AUTH_MODE=keys, GET /metrics needs an admin key or this token (Authorization: Bearer <token>).
    token: SecretStr | None = _env("METRICS_TOKEN", None)
    # A standalone worker serves its metrics on this port (unset = none).
    worker_port: int | None = _env("WORKER_METRICS_PORT", None, ge=1, le=65535)


class HooksSettings(Group):
    """Agent observations (the Claude Code hooks, docs/hooks.md)."""

    # task_context memories a hook captured (metadata with session_id and tool) older than this are
    # removed by a daily maintenance cron; 0 = keep them.
    observation_ttl_days: int = _env("OBSERVATION_TTL_DAYS", 30, ge=0, le=3650)


class DedupSettings(Group):
    """Dedup (cron)."""

    # Near-duplicates: cosine at or above this; unset = the model's calibrated value (core/embedding_models.py)
    similarity_threshold: float | None = _env("DEDUP_SIMILARITY_THRESHOLD", None, gt=0, le=1)
    batch_size: int = _env("DEDUP_BATCH_SIZE", 100, ge=1, le=10_000)
    cron_hours: set[int] = _env("DEDUP_CRON_HOURS", {0, 6, 12, 18})
    # False = no scheduled sweep (POST /v1/maintenance/dedup still runs one on demand).
    cron_enabled: bool = _env("DEDUP_CRON_ENABLED", True)

    @field_validator("cron_hours", mode="before")
    @classmethod
    def _parse_hours(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip().strip("{}[]")
            try:
                return {int(part) for part in text.replace(" ", "").split(",") if part}
            except ValueError:
                raise ValueError("DEDUP_CRON_HOURS must be hours 0-23 separated by commas, e.g. 0,6,12,18") from None
        return value

    @field_validator("cron_hours")
    @classmethod
    def _check_hours(cls, value: set[int]) -> set[int]:
        if not value or any(h < 0 or h > 23 for h in value):
            raise ValueError("DEDUP_CRON_HOURS must be a non-empty set of hours 0-23, e.g. 0,6,12,18")
        return value


class IdentitySettings(Group):
    """Entity identity (docs/identity.md)."""

    # The resolution gate on every entity write: score = max(exact, variant, 0.45 fuzzy + 0.55 semantic);
    # merge at or above AUTO_MERGE_THRESHOLD, a pending SAME_AS review pair at or above PENDING_MATCH_THRESHOLD.
    resolution: bool = _env("ENTITY_RESOLUTION", True)
    auto_merge_threshold: float = _env("AUTO_MERGE_THRESHOLD", 0.95, gt=0, le=1)
    pending_match_threshold: float = _env("PENDING_MATCH_THRESHOLD", 0.85, gt=0, le=1)
    # Per type family (person, organization, place, technology); unset = the two above. Generic types (thing,
    # concept, none) never merge, whatever the thresholds.
    auto_merge_threshold_person: float | None = _env("AUTO_MERGE_THRESHOLD_PERSON", None, gt=0, le=1)
    pending_match_threshold_person: float | None = _env("PENDING_MATCH_THRESHOLD_PERSON", None, gt=0, le=1)
    auto_merge_threshold_organization: float | None = _env("AUTO_MERGE_THRESHOLD_ORGANIZATION", None, gt=0, le=1)
    pending_match_threshold_organization: float | None = _env("PENDING_MATCH_THRESHOLD_ORGANIZATION", None, gt=0,
                                                              le=1)
    auto_merge_threshold_place: float | None = _env("AUTO_MERGE_THRESHOLD_PLACE", None, gt=0, le=1)
    pending_match_threshold_place: float | None = _env("PENDING_MATCH_THRESHOLD_PLACE", None, gt=0, le=1)
    auto_merge_threshold_technology: float | None = _env("AUTO_MERGE_THRESHOLD_TECHNOLOGY", None, gt=0, le=1)
    pending_match_threshold_technology: float | None = _env("PENDING_MATCH_THRESHOLD_TECHNOLOGY", None, gt=0, le=1)
    # false = no string or meaning similarity (and no typo shape): only exact keys, the lexicon and known name shapes.
    fuzzy_matching: bool = _env("ENTITY_FUZZY_MATCHING", True)
    # Candidates scoring within this of the best one make a name ambiguous: pending pairs to each, no merge.
    ambiguity_margin: float = _env("ENTITY_AMBIGUITY_MARGIN", 0.05, ge=0, le=1)

    @model_validator(mode="after")
    def _check_thresholds(self) -> IdentitySettings:
        if self.pending_match_threshold > self.auto_merge_threshold:
            raise ValueError("PENDING_MATCH_THRESHOLD must not exceed AUTO_MERGE_THRESHOLD")
        for family, (merge, pending) in self.bands.items():
            if pending > merge:
                raise ValueError(f"PENDING_MATCH_THRESHOLD_{family.upper()} ({pending}) must not exceed "
                                 f"AUTO_MERGE_THRESHOLD_{family.upper()} ({merge})")
        return self

    @property
    def bands(self) -> dict[str, tuple[float, float]]:
        """type family -> (auto-merge threshold, pending threshold), unset ones from the global pair."""
        bands: dict[str, tuple[float, float]] = {}
        for family in ("person", "organization", "place", "technology"):
            merge = getattr(self, f"auto_merge_threshold_{family}")
            pending = getattr(self, f"pending_match_threshold_{family}")
            bands[family] = (self.auto_merge_threshold if merge is None else float(merge),
                             self.pending_match_threshold if pending is None else float(pending))
        return bands


class RetentionSettings(Group):
    # Retrieval traces (POST /v1/search with trace=true) are removed after this many days.
    trace_ttl_days: int = _env("TRACE_TTL_DAYS", 30, ge=1, le=3650)
    # Conversation messages and task runs (docs/runs.md) older than this are erased by a daily cron;
    # 0 = keep them.
    message_retention_days: int = _env("MESSAGE_RETENTION_DAYS", 0, ge=0, le=36_500)
    run_retention_days: int = _env("RUN_RETENTION_DAYS", 0, ge=0, le=36_500)


class Settings(BaseSettings):
    """Every setting, in groups. The order of the groups and of their fields is the order of .env.example."""

    # extra="forbid": a keyword that names no setting is an error, not silently dropped.
    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="forbid")

    gemini: GeminiSettings = Field(default_factory=GeminiSettings)
    llm: LlmSettings = Field(default_factory=LlmSettings)
    neo4j: Neo4jSettings = Field(default_factory=Neo4jSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    redis: RedisQueueSettings = Field(default_factory=RedisQueueSettings)
    writepath: WritePathSettings = Field(default_factory=WritePathSettings)
    qdrant: QdrantSettings = Field(default_factory=QdrantSettings)
    embeddings: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    service: ServiceSettings = Field(default_factory=ServiceSettings)
    access: AccessSettings = Field(default_factory=AccessSettings)
    console: ConsoleSettings = Field(default_factory=ConsoleSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    hooks: HooksSettings = Field(default_factory=HooksSettings)
    dedup: DedupSettings = Field(default_factory=DedupSettings)
    identity: IdentitySettings = Field(default_factory=IdentitySettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keywords first, then the environment, then the .env file(s) (`_env_file=` or model_config's)."""
        assert isinstance(dotenv_settings, DotEnvSettingsSource)
        files = dotenv_settings.env_file
        paths = [] if files is None else [files] if isinstance(files, str | os.PathLike) else list(files)
        return (KeywordSource(settings_cls, init_settings()),
                EnvironmentSource(settings_cls, paths, dotenv_settings.env_file_encoding))

    @model_validator(mode="after")
    def _check_across_groups(self) -> Settings:
        """A rule over settings of several groups: one line that names them."""
        if self.service.environment == "production":
            pw = self.neo4j.password.get_secret_value() if self.neo4j.password else ""
            if pw in {"", "changeme", "password", "neo4j", "your-neo4j-password"}:
                raise ValueError("NEO4J_PASSWORD must be set to a real secret when ENVIRONMENT=production")
        if self.embeddings.embedder == "gemini" and self.gemini.api_key is None:
            raise ValueError("EMBEDDER=gemini needs GOOGLE_API_KEY")
        if self.llm.provider == "gemini" and self.gemini.api_key is None:
            raise ValueError("LLM_PROVIDER=gemini needs GOOGLE_API_KEY")
        if self.embeddings.embedder == "openai":
            if self.llm.openai_embedding_model is None or self.llm.openai_embedding_dim is None:
                raise ValueError("EMBEDDER=openai needs OPENAI_EMBEDDING_MODEL and OPENAI_EMBEDDING_DIM")
            if not self.llm.reaches_openai:
                raise ValueError("EMBEDDER=openai needs OPENAI_BASE_URL (a local server) or OPENAI_API_KEY "
                                 "(api.openai.com)")
        return self

    @property
    def resolved_llm_provider(self) -> str:
        """LLM_PROVIDER, or gemini when GOOGLE_API_KEY is set, else offline."""
        if self.llm.provider is not None:
            return self.llm.provider
        return "gemini" if self.gemini.api_key is not None else "offline"

    @property
    def resolved_auth_mode(self) -> str:
        return self.access.auth_mode or ("none" if self.service.loopback else "keys")

    @property
    def resolved_allowed_hosts(self) -> list[str]:
        """On a loopback HOST: the loopback names (a browser page cannot rebind its DNS onto the
        API); on any other HOST, where every route needs a key anyway: any host unless set."""
        if self.access.allowed_hosts:
            return self.access.allowed_hosts
        host = self.service.host
        return sorted({"localhost", "127.0.0.1", "[::1]", "::1", host}) if self.service.loopback else ["*"]

    @property
    def resolved_qdrant_path(self) -> Path:
        return self.qdrant.path if self.qdrant.path is not None else self.service.data_dir / "qdrant"

    @property
    def resolved_model_cache_dir(self) -> Path:
        cache = self.embeddings.cache_dir
        return cache if cache is not None else self.service.data_dir / "models"

    @property
    def calibration(self) -> Calibration:
        """The similarity thresholds of the embedding model in use, with DEDUP_SIMILARITY_THRESHOLD,
        GRAPH_ENTITY_WEIGHT and RELEVANCE_FLOOR when set."""
        measured = calibration(self.embeddings.resolved_model_id)
        if self.dedup.similarity_threshold is not None:
            measured = replace(measured, dedup=self.dedup.similarity_threshold)
        if self.search.graph_entity_weight is not None:
            measured = replace(measured, graph_entity=self.search.graph_entity_weight)
        if self.search.relevance_floor is not None:
            measured = replace(measured, relevance=self.search.relevance_floor)
        return measured

    @property
    def run_embedded_worker(self) -> bool:
        if self.worker.embedded is not None:
            return self.worker.embedded
        return self.qdrant.url is None

    @property
    def worker_in_child(self) -> bool:
        return self.worker.process == "child" and self.run_embedded_worker and self.qdrant.on_disk

    @property
    def embeds_in_child(self) -> bool:
        process = self.embeddings.process
        if self.embeddings.embedder != "local" or process == "inline" or self.worker_in_child:
            return False
        return process == "child" or self.run_embedded_worker

    @property
    def profile(self) -> str:
        return "embedded" if self.qdrant.url is None else "server"


# Every environment variable -> (its group, its field), in the order of the groups and their fields.
ENV_FIELDS: dict[str, tuple[str, str]] = {
    str(info.validation_alias): (group, name)
    for group, group_info in Settings.model_fields.items()
    for name, info in group_info.annotation.model_fields.items()  # type: ignore[union-attr]
}


def env_names() -> list[str]:
    """Every setting's environment variable, in order."""
    return list(ENV_FIELDS)


def settings_groups() -> list[list[str]]:
    """The environment variables of each group, groups and fields in order (.env.example follows it)."""
    groups: dict[str, list[str]] = {}
    for name, (group, _) in ENV_FIELDS.items():
        groups.setdefault(group, []).append(name)
    return list(groups.values())


def env_dict(settings: Settings) -> dict[str, Any]:
    """{ENV_NAME: value} of every setting, secrets as they are (SecretStr): the keyword form of `settings`."""
    return {name: getattr(getattr(settings, group), field) for name, (group, field) in ENV_FIELDS.items()}


def _grouped(values: dict[str, Any]) -> dict[str, Any]:
    """{ENV_NAME: value} -> {group: {ENV_NAME: value}}; a key that names no setting is left as it is."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        where = ENV_FIELDS.get(key.upper())
        if where is None:
            out[key] = value
        else:
            out.setdefault(where[0], {})[key.upper()] = value
    return out


class KeywordSource(PydanticBaseSettingsSource):
    """The keyword arguments of `Settings(...)`: `neo4j_uri=` is NEO4J_URI (an environment variable's lower-case
    name), `neo4j=` a whole group (a model or a dict of its fields), which then takes nothing from the environment."""

    def __init__(self, settings_cls: type[BaseSettings], kwargs: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self._kwargs = kwargs

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        groups = Settings.model_fields
        out = _grouped({key: value for key, value in self._kwargs.items() if key not in groups})
        for group, value in self._kwargs.items():
            if group not in groups:
                continue
            fields = groups[group].annotation.model_fields  # type: ignore[union-attr]
            if isinstance(value, BaseModel):  # a whole group: every field of it
                value = {name: getattr(value, name) for name in fields}
            if isinstance(value, dict):
                value = {str(fields[k].validation_alias) if k in fields else k: v for k, v in value.items()}
                out[group] = {**value, **out.get(group, {})}
            else:
                out[group] = value
        return out


class EnvironmentSource(PydanticBaseSettingsSource):
    """The environment over the .env files (a later file over an earlier one), names case-insensitive, an empty
    value = unset (so compose's `${GOOGLE_API_KEY:-}` and a blank line copied from .env.example mean the default)."""

    def __init__(self, settings_cls: type[BaseSettings], env_files: Iterable[str | os.PathLike[str]],
                 encoding: str | None) -> None:
        super().__init__(settings_cls)
        self._files = [Path(f).expanduser() for f in env_files]
        self._encoding = encoding

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        values: dict[str, str] = {}
        for path in self._files:
            if path.is_file():
                values.update({k.upper(): v for k, v in dotenv_values(path, encoding=self._encoding).items() if v})
        values.update({k.upper(): v for k, v in os.environ.items() if v})
        return {group: fields for group, fields in _grouped(values).items() if group in Settings.model_fields}


def is_secret(name: str) -> bool:
    """Whether the setting NAME is a secret (its value never shown)."""
    where = ENV_FIELDS.get(name)
    if where is None:
        return False
    group, field = where
    return "SecretStr" in repr(Settings.model_fields[group].annotation.model_fields[field].annotation)  # type: ignore[union-attr]


def _shown(name: str, value: object) -> str | None:
    """The value a message may repeat: never a secret's, URLs with their password masked, one short line."""
    if is_secret(name) or isinstance(value, dict | SecretStr):
        return None
    text = mask_url(value) if isinstance(value, str) else str(value)
    text = text if text.isprintable() else repr(text)
    return text if len(text) <= 80 else text[:77] + "..."


def describe_errors(exc: ValidationError) -> list[str]:
    """One line per problem: `NAME: rule (got value)`; a rule about several settings names them itself."""
    lines: list[str] = []
    for error in exc.errors():
        msg = str(error["msg"]).removeprefix("Value error, ").replace("Input should be", "must be", 1)
        loc = [part for part in error["loc"] if isinstance(part, str)]
        names = [part for part in loc if part in ENV_FIELDS]
        others = [part for part in loc if part not in ENV_FIELDS and part not in Settings.model_fields]
        if not names and not others:  # a model validator (of a group or of several): its message names them
            lines.append(msg)
            continue
        name = names[-1] if names else others[0].upper()
        msg = msg.removeprefix(f"{name} ")
        shown = _shown(name, error.get("input"))
        lines.append(f"{name}: {msg}" + (f" (got {shown})" if shown is not None else ""))
    return lines


def load_settings(**overrides: Any) -> Settings:
    """`Settings(**overrides)` at a process entry: an invalid setting exits (status 1) with one line per problem
    on stderr, e.g. `RECONCILE_INTERVAL_SECONDS: must divide 60 (...) (got 7)`, instead of a traceback."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise SystemExit("\n".join(describe_errors(exc))) from None
