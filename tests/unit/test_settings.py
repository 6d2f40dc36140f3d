from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from service.core.settings import ENV_FIELDS, Settings, env_dict, env_names, is_secret, load_settings, settings_groups

ROOT = Path(__file__).resolve().parents[2]
NAMES = env_names()


def test_defaults_match_the_documented_ones() -> None:
    s = Settings(_env_file=None)  # type: ignore[call-arg]
    assert s.gemini.llm_model == "gemini-3-flash-preview"
    assert s.gemini.llm_fallback_model == "gemini-2.5-flash"
    assert s.service.port == 8199
    assert s.dedup.cron_hours == {0, 6, 12, 18}
    assert s.redis.task_ttl_seconds == 7 * 24 * 3600
    assert s.profile == "embedded" and s.run_embedded_worker
    assert s.resolved_qdrant_path == Path("data/qdrant")


def test_env_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEDUP_CRON_HOURS", "{1, 13}")
    monkeypatch.setenv("QDRANT_URL", "http://qdrant:6333")
    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    s = Settings(_env_file=None)  # type: ignore[call-arg]
    assert s.dedup.cron_hours == {1, 13}
    assert s.profile == "server" and not s.run_embedded_worker
    assert s.gemini.api_key is not None and "k" not in repr(s.gemini.api_key)


@pytest.mark.parametrize("hours", ["25", ",", "1,x"])
def test_bad_cron_hours_are_rejected(monkeypatch: pytest.MonkeyPatch, hours: str) -> None:
    monkeypatch.setenv("DEDUP_CRON_HOURS", hours)
    with pytest.raises(ValidationError):
        Settings(_env_file=None)  # type: ignore[call-arg]


def test_production_refuses_placeholder_password() -> None:
    with pytest.raises(ValidationError, match="NEO4J_PASSWORD"):
        Settings(_env_file=None, environment="production", neo4j_password="changeme")  # type: ignore[call-arg]
    ok = Settings(_env_file=None, environment="production", neo4j_password="s3cr3t-xyz")  # type: ignore[call-arg]
    assert ok.service.environment == "production"


def test_the_configuration_table_lists_every_setting() -> None:
    table = (ROOT / "docs" / "configuration.md").read_text()
    for name in NAMES:
        assert f"`{name}`" in table, f"{name} missing from the table of docs/configuration.md"


# ---------------------------------------------------------------------------- empty = unset


def _clean_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """No setting in the environment; the defaults."""
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    return Settings(_env_file=None).model_dump()  # type: ignore[call-arg]


def test_an_empty_value_is_unset_for_every_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    defaults = _clean_env(monkeypatch)
    env_file = tmp_path / ".env"
    env_file.write_text("".join(f"{name}=\n" for name in NAMES))
    assert Settings(_env_file=env_file).model_dump() == defaults  # type: ignore[call-arg]
    for name in NAMES:
        monkeypatch.setenv(name, "")
    s = Settings(_env_file=None)  # type: ignore[call-arg]
    assert s.model_dump() == defaults
    # what compose's `GOOGLE_API_KEY: ${GOOGLE_API_KEY:-}` passes: no key, so the offline extractor
    assert s.gemini.api_key is None and s.neo4j.password is None and s.service.port == 8199


def test_an_empty_value_in_the_environment_leaves_the_env_file_value(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    _clean_env(monkeypatch)
    env_file = tmp_path / ".env"
    env_file.write_text("PORT=9001\n")
    monkeypatch.setenv("PORT", "")
    assert Settings(_env_file=env_file).service.port == 9001  # type: ignore[call-arg]
    monkeypatch.setenv("PORT", "9002")
    assert Settings(_env_file=env_file).service.port == 9002  # type: ignore[call-arg]


# ---------------------------------------------------------------------------- .env.example

EXAMPLE_LINE = re.compile(r"^# ([A-Z][A-Z0-9_]*)=(.*)$")


def example_settings() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for line in (ROOT / ".env.example").read_text().splitlines()
            if (m := EXAMPLE_LINE.match(line))]


def test_env_example_is_all_comments() -> None:
    for number, line in enumerate((ROOT / ".env.example").read_text().splitlines(), 1):
        assert not line.strip() or line.startswith("#"), f".env.example:{number} is not commented out: {line}"


def test_env_example_documents_every_setting_once() -> None:
    names = [name for name, _ in example_settings()]
    assert sorted(names) == sorted(NAMES), (set(NAMES) - set(names), set(names) - set(NAMES))
    assert len(names) == len(set(names))


def test_env_example_shows_each_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`cp .env.example .env` changes nothing, and neither does uncommenting every setting in it."""
    defaults = _clean_env(monkeypatch)
    copied = tmp_path / "copied.env"
    copied.write_bytes((ROOT / ".env.example").read_bytes())
    assert Settings(_env_file=copied).model_dump() == defaults  # type: ignore[call-arg]
    uncommented = tmp_path / "uncommented.env"
    uncommented.write_text("".join(f"{name}={value}\n" for name, value in example_settings()))
    s = Settings(_env_file=uncommented)  # type: ignore[call-arg]
    for name, value in env_dict(s).items():
        group, field = ENV_FIELDS[name]
        default = defaults[group][field]
        assert value == default, f".env.example: {name}={value!r}, the default is {default!r}"


def example_sections() -> list[list[str]]:
    """The settings under each `# --- Section ---` line of .env.example, in order."""
    sections: list[list[str]] = []
    for line in (ROOT / ".env.example").read_text().splitlines():
        if line.startswith("# --- "):
            sections.append([])
        elif sections and (m := EXAMPLE_LINE.match(line)):
            sections[-1].append(m.group(1))
    return sections


def test_env_example_is_grouped_as_the_settings() -> None:
    """Each settings group (service/core/settings.py) is one section of .env.example, in the same order."""
    groups = settings_groups()
    assert len(groups) >= 10 and sorted(name for group in groups for name in group) == sorted(NAMES)
    sections = example_sections()
    assert [sorted(section) for section in sections] == [sorted(group) for group in groups]


# ---------------------------------------------------------------------------- one line per invalid setting


def _env_without_settings(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in NAMES}
    env.update(extra)
    return env


@pytest.mark.parametrize("argv", [["-m", "service", "keys", "list"], ["-m", "worker"], ["-m", "service.mcp"]],
                         ids=["service", "worker", "mcp"])
def test_an_invalid_setting_exits_with_one_line(argv: list[str], tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, *argv], cwd=tmp_path, env=_env_without_settings(
        RECONCILE_INTERVAL_SECONDS="7"), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1, proc
    assert proc.stderr.splitlines() == [
        "RECONCILE_INTERVAL_SECONDS: must divide 60 (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30 or 60) (got 7)"]
    assert proc.stdout == ""


def test_each_invalid_setting_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    _clean_env(monkeypatch)
    monkeypatch.setenv("RECONCILE_INTERVAL_SECONDS", "0")
    monkeypatch.setenv("LOG_FORMAT", "xml")
    monkeypatch.setenv("DEDUP_CRON_HOURS", "1,x")
    with pytest.raises(SystemExit) as exc:
        load_settings(_env_file=None)
    assert str(exc.value.code).splitlines() == [
        "RECONCILE_INTERVAL_SECONDS: must be greater than or equal to 1 (got 0)",
        "LOG_FORMAT: must be 'auto', 'json' or 'console' (got xml)",
        "DEDUP_CRON_HOURS: must be hours 0-23 separated by commas, e.g. 0,6,12,18 (got 1,x)",
    ]
    monkeypatch.setenv("RECONCILE_INTERVAL_SECONDS", "30")
    monkeypatch.delenv("LOG_FORMAT")
    monkeypatch.delenv("DEDUP_CRON_HOURS")
    monkeypatch.setenv("PENDING_MATCH_THRESHOLD", "0.99")  # a rule over two settings names both itself
    with pytest.raises(SystemExit) as exc:
        load_settings(_env_file=None)
    assert exc.value.code == "PENDING_MATCH_THRESHOLD must not exceed AUTO_MERGE_THRESHOLD"


def test_an_invalid_secret_is_never_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    _clean_env(monkeypatch)
    secrets = [name.lower() for name in NAMES if is_secret(name)]
    assert {"google_api_key", "neo4j_password", "memory_api_key"} <= set(secrets)
    for name in secrets:
        with pytest.raises(SystemExit) as exc:
            load_settings(_env_file=None, **{name: 987654321})
        assert exc.value.code == f"{name.upper()}: must be a valid string"


def test_arq_try_limit_outlasts_the_retry_budget() -> None:
    """A dependency's slowness is retried against WRITE_RETRY_BUDGET_SECONDS, not a count: ARQ's own try limit is only
    a backstop that a budget's retries (each at least a second apart) cannot reach. ARQ_MAX_RETRIES=N still gives a
    job N + 1 attempts lost with their worker (the reaper's limit)."""
    from worker.embedded import worker_options

    short = Settings(_env_file=None, arq_max_retries=0, write_retry_budget_seconds=60)  # type: ignore[call-arg]
    options = worker_options(short)
    tries = {f.name: f.max_tries for f in options["functions"]}
    assert options["max_tries"] > 60 and tries["memory_raw"] > 60
    assert tries["maintenance_optimize"] == 1  # its own policy: one attempt
    assert short.redis.max_tries == 1
    default = Settings(_env_file=None)  # type: ignore[call-arg]
    assert default.redis.max_tries == 3 and default.writepath.retry_budget_seconds >= 15 * 60
    assert worker_options(default)["max_tries"] > default.writepath.retry_budget_seconds


def test_qdrant_on_disk_false_keeps_vectors_in_memory(tmp_path: Path) -> None:
    """the v1 API's QDRANT_ON_DISK: false without QDRANT_URL = an in-process, in-memory vector store, and the embedded
    worker in the API process (a child could not reach an in-memory store)."""
    from service.deps import build_vector_store
    from service.stores.qdrant_edge import EdgeVectorStore
    from service.stores.qdrant_server import QdrantServerVectorStore

    memory = Settings(_env_file=None, data_dir=tmp_path, qdrant_on_disk=False)  # type: ignore[call-arg]
    assert isinstance(build_vector_store(memory), QdrantServerVectorStore) and not memory.worker_in_child
    disk = Settings(_env_file=None, data_dir=tmp_path)  # type: ignore[call-arg]
    assert isinstance(build_vector_store(disk), EdgeVectorStore) and disk.worker_in_child


def test_dev_sh_reads_its_connection_settings_through_the_settings_object(tmp_path: Path) -> None:
    """scripts/dev.sh's inline Python (it starts Redis and Neo4j where the settings point) runs as written."""
    script = (ROOT / "scripts" / "dev.sh").read_text()
    code = script.split("<<'PY'\n", 1)[1].split("\nPY\n", 1)[0]
    env = {k: v for k, v in os.environ.items() if k.upper() not in env_names()}
    env.update({"REDIS_URL": "redis://127.0.0.1:16400/2", "NEO4J_URI": "bolt://127.0.0.1:17700",
                "NEO4J_PASSWORD": "pw with space", "DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(ROOT)})
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["REDIS_URL=redis://127.0.0.1:16400/2", "NEO4J_URI=bolt://127.0.0.1:17700",
                                       "NEO4J_DATABASE=memory", "NEO4J_PW='pw with space'",
                                       f"DATA_DIR={tmp_path / 'data'}"]


# ------------------------------------------------------------------ defaults quoted in the docs

_TABLE_ROW = re.compile(r"^\| `([A-Z0-9_]+)` \| `([^`|]*)` \|", re.MULTILINE)
# a number quoted beside a setting in prose: "(`SEARCH_WEIGHT_GRAPH`, 3", "`RRF_K` (default 5)",
# "`QUEUE_AGE_DEGRADED_SECONDS` = 600"
_PROSE = re.compile(r"`([A-Z][A-Z0-9_]{2,})`(?:,| =| \(default| default)\s+`?(-?\d{1,3}(?:,\d{3})+|-?\d+(?:\.\d+)?)`?"
                    r"(?![\d.%x]| ?(?:days?|hours?|minutes?|min|ms|s\b|[KMG]i?B|k\b|thousand|million))")


def _same(quoted: str, value: Any) -> bool:
    if isinstance(value, bool):
        return quoted.lower() == str(value).lower()
    if isinstance(value, Path):
        return Path(quoted) == value
    if isinstance(value, (int, float)):
        try:
            return float(quoted.replace("_", "").replace(",", "")) == float(value)
        except ValueError:
            return False
    if isinstance(value, (list, set, frozenset, tuple)):
        return True  # a collection's default is written in words in the table
    return str(value) == quoted or str(getattr(value, "value", value)) == quoted


def test_the_defaults_the_docs_quote_are_the_settings_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every default in the configuration table, and every number quoted beside a setting in the README and docs,
    is the setting's default (a literal in backticks; "(unset)", "the model's" and words are not checked)."""
    defaults = env_dict(_settings_without_env(monkeypatch))
    wrong = [f"docs/configuration.md: {name} says {quoted!r}, the default is {defaults[name]!r}"
             for name, quoted in _TABLE_ROW.findall((ROOT / "docs" / "configuration.md").read_text())
             if name in defaults and defaults[name] is not None and not _same(quoted, defaults[name])]
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for name, quoted in _PROSE.findall(doc.read_text()):
            value = defaults.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and not _same(quoted, value):
                wrong.append(f"{doc.relative_to(ROOT)}: {name} quoted as {quoted}, the default is {value}")
    assert not wrong, "\n".join(wrong)


def _settings_without_env(monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    return Settings(_env_file=None)  # type: ignore[call-arg]
