"""The one settings object. Built once at start (API lifespan, worker startup, CLI) and passed down.

No other module reads the environment. A process entry builds it with `load_settings()`, which turns an invalid
setting into one line per problem (`NAME: rule (got value)`) and exit status 1, not a traceback.
An empty value counts as unset, for every setting (`GOOGLE_API_KEY=` = no key).
"""

from __future__ import annotations

import ipaddress
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from service.ai.models import Calibration, calibration

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


class Settings(BaseSettings):
    # env_ignore_empty: `NAME=` (in the environment or .env) is the default, so compose's `${GOOGLE_API_KEY:-}`
    # and a blank line copied from .env.example mean "unset", never an empty key or an empty number.
    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore",
                                      env_ignore_empty=True)

    # --- Gemini ---------------------------------------------------------------------------
    google_api_key: SecretStr | None = None
    gemini_llm_model: str = "gemini-3-flash-preview"
    gemini_llm_fallback_model: str = "gemini-2.5-flash"
    gemini_embedder_model: str = "gemini-embedding-001"
    gemini_embedding_dim: int = Field(default=768, ge=8, le=3072)
    gemini_timeout_seconds: float = Field(default=60.0, gt=0)
    # Only for proxies and tests (a local fake of the Gemini API); unset = Google's endpoint.
    gemini_base_url: str | None = None

    # --- LLM provider (docs/llm.md) ---------------------------------------------------------
    # Who extracts facts and writes summaries: gemini, openai (any OpenAI-compatible server: OpenAI, OpenRouter,
    # Ollama, vLLM, llama.cpp's server, LM Studio) or offline (rules). Unset = gemini with GOOGLE_API_KEY, else offline.
    llm_provider: Literal["gemini", "openai", "offline"] | None = None
    # The OpenAI-compatible server, e.g. http://127.0.0.1:11434/v1 (Ollama); unset = https://api.openai.com/v1.
    openai_base_url: str | None = None
    openai_api_key: SecretStr | None = None  # optional for local servers
    llm_model: str | None = Field(default=None, min_length=1, max_length=200)  # LLM_PROVIDER=openai: the model
    llm_fallback_model: str | None = Field(default=None, min_length=1, max_length=200)  # on 429/5xx after retries
    llm_timeout_seconds: float = Field(default=60.0, gt=0)
    llm_concurrency: int = Field(default=4, ge=1, le=256)  # requests in flight to the server, per process
    # the cap on each answer (a small model looping inside a JSON string ends truncated, repaired or offline)
    llm_max_output_tokens: int = Field(default=4096, ge=64, le=131_072)
    # EMBEDDER=openai: the server's embeddings model and the dimension of its vectors (checked at start)
    openai_embedding_model: str | None = Field(default=None, min_length=1, max_length=200)
    openai_embedding_dim: int | None = Field(default=None, ge=8, le=8192)

    # --- Neo4j ----------------------------------------------------------------------------
    neo4j_uri: str = "neo4j://127.0.0.1:7687"
    neo4j_user: str = "neo4j"
    neo4j_password: SecretStr | None = None
    neo4j_database: str = "memory"
    graph_timeout_seconds: float = Field(default=5.0, gt=0)

    # --- Search (docs/retrieval.md) --------------------------------------------------------
    search_candidates: int = Field(default=50, ge=1, le=500)  # each retriever's list length
    # The graph retriever proposes up to GRAPH_CANDIDATES memories (those mentioning the entities the query names,
    # or one relation away) and ranks them by the query without those names (docs/retrieval.md): cosine plus
    # GRAPH_ENTITY_WEIGHT x the graph score over the best, fused (RRF_K) with BM25 among them at GRAPH_LEXICAL_WEIGHT.
    graph_candidates: int = Field(default=1000, ge=1, le=5000)
    graph_entity_weight: float | None = Field(default=None, ge=0)  # unset = the embedding model's calibrated value
    graph_lexical_weight: float = Field(default=0.5, ge=0)
    # a query naming several entities ranks each one's memories apart, fused (service/search/graph.py: per_entity);
    # an experiment, off by default (measured: docs/retrieval.md)
    graph_decompose: bool = False
    rrf_k: float = Field(default=5.0, gt=0)
    search_weight_dense: float = Field(default=1.0, ge=0)
    search_weight_lexical: float = Field(default=1.5, ge=0)
    search_weight_graph: float = Field(default=3.0, ge=0)
    search_weight_time: float = Field(default=1.0, ge=0)
    # conversations: a message's relative time ("yesterday", "last Saturday") resolved against its timestamp into
    # its memories' occurred_at (service/memory/windows.py: anchored_time)
    time_anchoring: bool = True
    # pseudo-relevance feedback's list weight (service/search/feedback.py); 0 = off (measured: docs/retrieval.md)
    search_feedback_weight: float = Field(default=0.0, ge=0)
    # entity-linked expansion's list weight (service/search/expansion.py); 0 = off (measured: docs/retrieval.md)
    search_expansion_weight: float = Field(default=0.0, ge=0)
    # neighbouring turns' list weight (service/search/neighbours.py); 0 = off: it helps LoCoMo's long chats a little
    # and hurts assistant histories of short unrelated sessions a lot (measured: docs/retrieval.md)
    search_neighbour_weight: float = Field(default=0.0, ge=0)
    query_cache_size: int = Field(default=2048, ge=0)  # query embeddings kept per process (0 = off)
    # The session context's order (service/search/context.py): recency's half-life in days
    context_recency_days: float = Field(default=30.0, gt=0)
    # Qdrant Edge: build the HNSW index and vacuum deleted points (in a child process) once this many points were
    # written or deleted since the last build (0 = never)
    optimize_min_unindexed: int = Field(default=20_000, ge=0)

    # --- Redis / ARQ ----------------------------------------------------------------------
    redis_url: str = "redis://localhost:6379"
    redis_timeout_seconds: float = Field(default=1.5, gt=0, le=10)
    # Redis Sentinel (docs/deployment.md): host:port of each sentinel; set = the primary is the one these name for
    # REDIS_SENTINEL_MASTER, and REDIS_URL gives only the database, user and password of the primary.
    redis_sentinels: Annotated[list[str], NoDecode] = []
    redis_sentinel_master: str = Field(default="mymaster", min_length=1, max_length=200)
    redis_sentinel_password: SecretStr | None = None
    # With REDIS_SENTINELS: a write is acknowledged (202) only once this many replicas hold it (Redis WAIT), so a
    # failover cannot lose it (docs/decisions.md "Acknowledged writes and failover"); 0 = answer at once.
    redis_wait_replicas: int = Field(default=1, ge=0, le=5)
    # Queues of user shards (service/tasks/shards.py): a user's jobs all go to the queue of shard
    # sha256(user_id) mod WORKER_SHARDS, consumed by `python -m worker --shard K`; 1 = one queue (ARQ_QUEUE_NAME).
    worker_shards: int = Field(default=1, ge=1, le=1024)
    arq_queue_name: str = "memory-platform:queue"
    # Retries after the first attempt of a job on transient failures (attempts = ARQ_MAX_RETRIES + 1).
    arq_max_retries: int = Field(default=2, ge=0, le=20)
    arq_job_timeout: int = Field(default=300, ge=1)
    # Jobs in flight at once. More of them wait together at the embedding and graph steps, which then run in
    # bigger batches, so a larger number drains single writes faster (docs/benchmarks.md, "Jobs in flight").
    arq_max_jobs: int = Field(default=64, ge=1, le=256)
    # How often an idle worker looks for jobs; ARQ's 0.5 s default caps a worker at max_jobs/0.5 jobs/s.
    arq_poll_delay_seconds: float = Field(default=0.05, gt=0, le=5)
    task_ttl_seconds: int = Field(default=7 * 24 * 3600, ge=60)
    idempotency_window_seconds: int = Field(default=600, ge=0)

    # --- Write-path integrity (outbox, reconciler, reaper; docs/write-path.md) --------------
    # How often the outbox is drained and lost tasks are reaped (seconds; a divisor of 60).
    reconcile_interval_seconds: int = Field(default=60, ge=1, le=60)
    # Outbox entries and pending tasks younger than this are left to the job that made them.
    reconcile_grace_seconds: float = Field(default=10.0, ge=0, le=3600)
    # The daily full Qdrant <-> Neo4j comparison (UTC hour); RECONCILE_CRON_ENABLED=false turns it off.
    reconcile_cron_hour: int = Field(default=3, ge=0, le=23)
    reconcile_cron_enabled: bool = True
    # The daily rebuild of every user's entity communities (RECONCILE_CRON_HOUR, minute 40; docs/graph.md).
    communities_cron_enabled: bool = True

    # --- Qdrant ---------------------------------------------------------------------------
    qdrant_url: str | None = None
    qdrant_api_key: SecretStr | None = None
    qdrant_path: Path | None = None  # default: <DATA_DIR>/qdrant
    # Without QDRANT_URL: false keeps the vectors in memory only (qdrant-client's in-process mode; gone at exit,
    # and the embedded worker runs in the API process), as the v1 design's QDRANT_ON_DISK. Default true: Qdrant Edge
    qdrant_on_disk: bool = True
    qdrant_collection: str = "memory_platform"

    # --- Embeddings -----------------------------------------------------------------------
    embedder: EmbedderName = "local"
    embedding_batch_size: int = Field(default=64, ge=1, le=1024)
    # The local embedder (docs/decisions.md "The local embedder"): a model of the registry (service/ai/models.py) on
    # ONNX Runtime, e5-small-v2 (int8) by default, or all-MiniLM-L6-v2; its files come from
    # `python -m service models fetch`. EMBEDDER_MODEL_DIR = any sentence-transformers-style ONNX directory instead
    # (model.onnx + tokenizer.json), recorded in the stores as EMBEDDER_MODEL_ID (default: the directory's name).
    embedder_model: Literal["e5-small-v2", "all-MiniLM-L6-v2"] = "e5-small-v2"
    embedder_model_dir: Path | None = None
    embedder_model_id: str | None = Field(default=None, min_length=1, max_length=200)
    embedder_threads: int = Field(default=0, ge=0, le=64)  # ONNX Runtime intra-op threads; 0 = this process's cores
    model_cache_dir: Path | None = None  # where the built ONNX graph is kept; default <DATA_DIR>/models
    # A vector store written by another embedder of the same dimension is refused at start; true = start anyway,
    # recording a re-embed to the configured one as under way (then run `python -m service reembed`).
    allow_embedder_change: bool = False
    # Where the write path runs the local embedder: "child" = a child process at a lower CPU priority (the API's
    # event loop keeps the CPU and the GIL while the worker drains), "inline" = threads of this process,
    # "auto" = child when the worker runs inside the API process (the embedded profile) with EMBEDDER=local.
    embed_process: Literal["auto", "child", "inline"] = "inline"
    # How much lower the child's CPU priority is (Unix nice, 0-19): the accepting loop comes first.
    embed_process_nice: int = Field(default=10, ge=0, le=19)

    # --- Service --------------------------------------------------------------------------
    host: str = "127.0.0.1"
    port: int = Field(default=8199, ge=1, le=65535)
    data_dir: Path = Path("./data")
    default_user_id: str = "default_user"
    # None = decide from the profile: in-process when Qdrant is embedded (no QDRANT_URL).
    embedded_worker: bool | None = None
    # Where the embedded profile's worker runs: "inline" = in the API process (one event loop and GIL for both),
    # "child" = a child process that reaches the API process's Qdrant Edge shard through a Unix socket
    # (worker/child.py), so the accepting loop does not run jobs (the default: it drains faster, docs/decisions.md).
    # The server profile's worker is its own process.
    worker_process: Literal["inline", "child"] = "child"
    # The worker child's CPU priority below the API process's (Unix nice, 0-19): accepting comes first.
    worker_process_nice: int = Field(default=10, ge=0, le=19)
    # How many worker children (WORKER_PROCESS=child): child i consumes the shards k with k mod N = i (shard
    # i mod WORKER_SHARDS when there are fewer shards than children); all reach the API process's vector store.
    worker_processes: int = Field(default=1, ge=1, le=16)
    max_content_chars: int = Field(default=8000, ge=1, le=100_000)
    max_conversation_chars: int = Field(default=200_000, ge=1, le=5_000_000)
    log_level: str = "INFO"
    log_format: Literal["auto", "json", "console"] = "auto"
    environment: Literal["development", "production"] = "development"

    # --- Access (docs/api.md, "Authentication and tenants") ---------------------------------------------------------
    # keys = every route but /health and /v1/categories needs an API key; none = requests without a
    # key act as the user_id they name (allowed only on a loopback HOST). Unset: none on a loopback
    # HOST, keys otherwise.
    auth_mode: Literal["keys", "none"] | None = None
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    # conversations: every message is also kept verbatim, consecutive ones grouped into `interaction` memories of
    # at most this many messages (docs/retrieval.md: 2 retrieves best of 1, 2, 4)
    interaction_window_messages: int = Field(default=2, ge=1, le=50)
    max_import_bytes: int = Field(default=64 * 1024 * 1024, ge=1024, le=512 * 1024 * 1024)  # POST /v1/import
    # Per API key (or per client address without a key), per minute; 0 = no limit.
    rate_limit_writes_per_minute: int = Field(default=6000, ge=0)
    rate_limit_reads_per_minute: int = Field(default=12000, ge=0)
    # Host headers the API answers (DNS rebinding); empty = localhost, 127.0.0.1, [::1] and HOST.
    allowed_hosts: Annotated[list[str], NoDecode] = []
    # Browser origins allowed by CORS; empty = CORS off.
    cors_origins: Annotated[list[str], NoDecode] = []
    # The web console (/ui, docs/console.md): the key its session cookies are signed with (unset: a random key per
    # process, so sessions end at a restart; set it when several API processes serve the console), and how long a
    # session lasts.
    ui_session_secret: SecretStr | None = None
    ui_session_hours: int = Field(default=12, ge=1, le=24 * 30)

    # --- MCP ------------------------------------------------------------------------------
    # http = the API also serves MCP (streamable HTTP) at /mcp/; stdio = only `python -m service.mcp`.
    mcp_transport: Literal["stdio", "http"] = "stdio"
    # Where `python -m service.mcp` (stdio) finds the API; None = http://127.0.0.1:<PORT>.
    memory_api_url: str | None = None
    # The API key `python -m service.mcp` (stdio) sends to the API (needed when AUTH_MODE=keys).
    memory_api_key: SecretStr | None = None

    # --- Metrics (Prometheus) ---------------------------------------------------------------
    # With AUTH_MODE=keys, GET /metrics needs an admin key or this token (Authorization: Bearer <token>).
    metrics_token: SecretStr | None = None
    # A standalone worker serves its metrics on this port (unset = none).
    worker_metrics_port: int | None = Field(default=None, ge=1, le=65535)

    # --- Agent observations (the Claude Code hooks, docs/hooks.md) ---------------------------
    # task_context memories a hook captured (metadata with session_id and tool) older than this are
    # removed by a daily maintenance cron; 0 = keep them.
    observation_ttl_days: int = Field(default=30, ge=0, le=3650)

    # --- Dedup (cron) ---------------------------------------------------------------------
    # Near-duplicates: cosine at or above this; unset = the embedding model's calibrated value (service/ai/models.py)
    dedup_similarity_threshold: float | None = Field(default=None, gt=0, le=1)
    dedup_batch_size: int = Field(default=100, ge=1, le=10_000)
    dedup_cron_hours: Annotated[set[int], NoDecode] = {0, 6, 12, 18}
    # False = no scheduled sweep (POST /v1/maintenance/dedup still runs one on demand).
    dedup_cron_enabled: bool = True

    # --- Entity identity (docs/identity.md) -----------------------------------------------------
    # The resolution gate on every entity write: score = max(exact, variant, 0.45 fuzzy + 0.55 semantic);
    # merge at or above AUTO_MERGE_THRESHOLD, a pending SAME_AS review pair at or above PENDING_MATCH_THRESHOLD.
    entity_resolution: bool = True
    auto_merge_threshold: float = Field(default=0.95, gt=0, le=1)
    pending_match_threshold: float = Field(default=0.85, gt=0, le=1)
    # Per type family (person, organization, place, technology); unset = the two above. Generic types (thing,
    # concept, none) never merge, whatever the thresholds.
    auto_merge_threshold_person: float | None = Field(default=None, gt=0, le=1)
    pending_match_threshold_person: float | None = Field(default=None, gt=0, le=1)
    auto_merge_threshold_organization: float | None = Field(default=None, gt=0, le=1)
    pending_match_threshold_organization: float | None = Field(default=None, gt=0, le=1)
    auto_merge_threshold_place: float | None = Field(default=None, gt=0, le=1)
    pending_match_threshold_place: float | None = Field(default=None, gt=0, le=1)
    auto_merge_threshold_technology: float | None = Field(default=None, gt=0, le=1)
    pending_match_threshold_technology: float | None = Field(default=None, gt=0, le=1)
    # false = no string or meaning similarity (and no typo shape): only exact keys, the lexicon and known name shapes.
    entity_fuzzy_matching: bool = True
    # Candidates scoring within this of the best one make a name ambiguous: pending pairs to each, no merge.
    entity_ambiguity_margin: float = Field(default=0.05, ge=0, le=1)
    # Retrieval traces (POST /v1/search with trace=true) are removed after this many days.
    trace_ttl_days: int = Field(default=30, ge=1, le=3650)
    # Conversation messages and task runs (docs/runs.md) older than this are erased by a daily cron;
    # 0 = keep them.
    message_retention_days: int = Field(default=0, ge=0, le=36_500)
    run_retention_days: int = Field(default=0, ge=0, le=36_500)

    @field_validator("dedup_cron_hours", mode="before")
    @classmethod
    def _parse_hours(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip().strip("{}[]")
            try:
                return {int(part) for part in text.replace(" ", "").split(",") if part}
            except ValueError:
                raise ValueError("DEDUP_CRON_HOURS must be hours 0-23 separated by commas, e.g. 0,6,12,18") from None
        return value

    @field_validator("dedup_cron_hours")
    @classmethod
    def _check_hours(cls, value: set[int]) -> set[int]:
        if not value or any(h < 0 or h > 23 for h in value):
            raise ValueError("DEDUP_CRON_HOURS must be a non-empty set of hours 0-23, e.g. 0,6,12,18")
        return value

    @model_validator(mode="after")
    def _check_resolution(self) -> Settings:
        if self.pending_match_threshold > self.auto_merge_threshold:
            raise ValueError("PENDING_MATCH_THRESHOLD must not exceed AUTO_MERGE_THRESHOLD")
        for family, (merge, pending) in self.resolution_bands.items():
            if pending > merge:
                raise ValueError(f"PENDING_MATCH_THRESHOLD_{family.upper()} ({pending}) must not exceed "
                                 f"AUTO_MERGE_THRESHOLD_{family.upper()} ({merge})")
        return self

    @property
    def arq_max_tries(self) -> int:
        """Attempts per job, the first included (ARQ's `max_tries`)."""
        return self.arq_max_retries + 1

    @property
    def resolution_bands(self) -> dict[str, tuple[float, float]]:
        """type family -> (auto-merge threshold, pending threshold), unset ones from the global pair."""
        bands: dict[str, tuple[float, float]] = {}
        for family in ("person", "organization", "place", "technology"):
            merge = getattr(self, f"auto_merge_threshold_{family}")
            pending = getattr(self, f"pending_match_threshold_{family}")
            bands[family] = (self.auto_merge_threshold if merge is None else float(merge),
                             self.pending_match_threshold if pending is None else float(pending))
        return bands

    @model_validator(mode="after")
    def _production_secrets(self) -> Settings:
        if self.environment == "production":
            pw = self.neo4j_password.get_secret_value() if self.neo4j_password else ""
            if pw in {"", "changeme", "password", "neo4j", "your-neo4j-password"}:
                raise ValueError("NEO4J_PASSWORD must be set to a real secret when ENVIRONMENT=production")
        if self.embedder == "gemini" and self.google_api_key is None:
            raise ValueError("EMBEDDER=gemini needs GOOGLE_API_KEY")
        return self

    @model_validator(mode="after")
    def _check_llm_provider(self) -> Settings:
        """An LLM provider or OpenAI embedder without what it needs: one line that names the settings."""
        reaches_openai = self.openai_base_url is not None or self.openai_api_key is not None
        if self.llm_provider == "gemini" and self.google_api_key is None:
            raise ValueError("LLM_PROVIDER=gemini needs GOOGLE_API_KEY")
        if self.llm_provider == "openai":
            if self.llm_model is None:
                raise ValueError("LLM_PROVIDER=openai needs LLM_MODEL (the model the server serves; docs/llm.md)")
            if not reaches_openai:
                raise ValueError("LLM_PROVIDER=openai needs OPENAI_BASE_URL (a local server) or OPENAI_API_KEY "
                                 "(api.openai.com)")
        if self.embedder == "openai":
            if self.openai_embedding_model is None or self.openai_embedding_dim is None:
                raise ValueError("EMBEDDER=openai needs OPENAI_EMBEDDING_MODEL and OPENAI_EMBEDDING_DIM")
            if not reaches_openai:
                raise ValueError("EMBEDDER=openai needs OPENAI_BASE_URL (a local server) or OPENAI_API_KEY "
                                 "(api.openai.com)")
        for name in ("openai_base_url",):
            url = getattr(self, name)
            if url is not None and urlsplit(url).scheme not in ("http", "https"):
                raise ValueError(f"{name.upper()} must be an http(s) URL, e.g. http://127.0.0.1:11434/v1 "
                                 f"(got {mask_url(url)[:80]})")
        return self

    @property
    def resolved_llm_provider(self) -> str:
        """LLM_PROVIDER, or gemini when GOOGLE_API_KEY is set, else offline."""
        if self.llm_provider is not None:
            return self.llm_provider
        return "gemini" if self.google_api_key is not None else "offline"

    @field_validator("allowed_hosts", "cors_origins", mode="before")
    @classmethod
    def _parse_list(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("redis_sentinels", mode="before")
    @classmethod
    def _parse_sentinels(cls, value: object) -> object:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, list):
            for item in value:
                host, sep, port = str(item).rpartition(":")
                if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                    raise ValueError("REDIS_SENTINELS must be host:port pairs separated by commas, e.g. "
                                     f"10.0.0.5:26379 ({item!r} is not)")
        return value

    @property
    def sentinel_addresses(self) -> list[tuple[str, int]]:
        """REDIS_SENTINELS as (host, port) pairs (empty: REDIS_URL names the primary itself)."""
        return [(host.strip("[]"), int(port)) for host, _, port in (s.rpartition(":") for s in self.redis_sentinels)]

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    @property
    def resolved_auth_mode(self) -> str:
        return self.auth_mode or ("none" if self.loopback else "keys")

    @property
    def resolved_allowed_hosts(self) -> list[str]:
        """On a loopback HOST: the loopback names (a browser page cannot rebind its DNS onto the
        API); on any other HOST, where every route needs a key anyway: any host unless set."""
        if self.allowed_hosts:
            return self.allowed_hosts
        return sorted({"localhost", "127.0.0.1", "[::1]", "::1", self.host}) if self.loopback else ["*"]

    @field_validator("reconcile_interval_seconds")
    @classmethod
    def _check_interval(cls, value: int) -> int:
        if 60 % value:
            raise ValueError("RECONCILE_INTERVAL_SECONDS must divide 60 (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30 or 60)")
        return value

    @property
    def safe_redis_url(self) -> str:
        """REDIS_URL with any password masked: the only form that goes into errors and logs (with Sentinel: the
        sentinels and the primary's name)."""
        if self.redis_sentinels:
            return f"sentinel {self.redis_sentinel_master} via {','.join(self.redis_sentinels)}"
        return mask_url(self.redis_url)

    @cached_property
    def resolved_qdrant_path(self) -> Path:
        return self.qdrant_path if self.qdrant_path is not None else self.data_dir / "qdrant"

    @property
    def embedding_model_id(self) -> str:
        """The model id the configured embedder records (its calibration's key, service/ai/models.py)."""
        if self.embedder != "local":
            return self.embedder
        if self.embedder_model_dir is not None:
            return self.embedder_model_id or self.embedder_model_dir.name
        return self.embedder_model

    @property
    def calibration(self) -> Calibration:
        """The similarity thresholds of the embedding model in use, with DEDUP_SIMILARITY_THRESHOLD and
        GRAPH_ENTITY_WEIGHT when set."""
        measured = calibration(self.embedding_model_id)
        if self.dedup_similarity_threshold is not None:
            measured = replace(measured, dedup=self.dedup_similarity_threshold)
        if self.graph_entity_weight is not None:
            measured = replace(measured, graph_entity=self.graph_entity_weight)
        return measured

    @property
    def resolved_model_cache_dir(self) -> Path:
        return self.model_cache_dir if self.model_cache_dir is not None else self.data_dir / "models"

    @property
    def run_embedded_worker(self) -> bool:
        if self.embedded_worker is not None:
            return self.embedded_worker
        return self.qdrant_url is None

    @property
    def worker_in_child(self) -> bool:
        return self.worker_process == "child" and self.run_embedded_worker and self.qdrant_on_disk

    @property
    def embeds_in_child(self) -> bool:
        if self.embedder != "local" or self.embed_process == "inline" or self.worker_in_child:
            return False
        return self.embed_process == "child" or self.run_embedded_worker

    @property
    def profile(self) -> str:
        return "embedded" if self.qdrant_url is None else "server"


def _is_secret(name: str) -> bool:
    field = Settings.model_fields.get(name)
    return field is not None and "SecretStr" in repr(field.annotation)


def _shown(name: str, value: object) -> str | None:
    """The value a message may repeat: never a secret's, URLs with their password masked, one short line."""
    if _is_secret(name) or isinstance(value, dict | SecretStr):
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
        if not loc:  # a model validator: its message names the settings
            lines.append(msg)
            continue
        name = loc[0].upper()
        msg = msg.removeprefix(f"{name} ")
        shown = _shown(loc[0], error.get("input"))
        lines.append(f"{name}: {msg}" + (f" (got {shown})" if shown is not None else ""))
    return lines


def load_settings(**overrides: Any) -> Settings:
    """`Settings(**overrides)` at a process entry: an invalid setting exits (status 1) with one line per problem
    on stderr, e.g. `RECONCILE_INTERVAL_SECONDS: must divide 60 (...) (got 7)`, instead of a traceback."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise SystemExit("\n".join(describe_errors(exc))) from None
