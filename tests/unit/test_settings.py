from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from service.settings import Settings


def test_defaults_match_the_documented_ones() -> None:
    s = Settings(_env_file=None)  # type: ignore[call-arg]
    assert s.gemini_llm_model == "gemini-3-flash-preview"
    assert s.gemini_llm_fallback_model == "gemini-2.5-flash"
    assert s.port == 8199
    assert s.dedup_cron_hours == {0, 6, 12, 18}
    assert s.task_ttl_seconds == 7 * 24 * 3600
    assert s.profile == "embedded" and s.run_embedded_worker
    assert s.resolved_qdrant_path == Path("data/qdrant")


def test_env_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEDUP_CRON_HOURS", "{1, 13}")
    monkeypatch.setenv("QDRANT_URL", "http://qdrant:6333")
    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    s = Settings(_env_file=None)  # type: ignore[call-arg]
    assert s.dedup_cron_hours == {1, 13}
    assert s.profile == "server" and not s.run_embedded_worker
    assert s.google_api_key is not None and "k" not in repr(s.google_api_key)


@pytest.mark.parametrize("hours", ["25", "", "1,x"])
def test_bad_cron_hours_are_rejected(monkeypatch: pytest.MonkeyPatch, hours: str) -> None:
    monkeypatch.setenv("DEDUP_CRON_HOURS", hours)
    with pytest.raises(ValidationError):
        Settings(_env_file=None)  # type: ignore[call-arg]


def test_production_refuses_placeholder_password() -> None:
    with pytest.raises(ValidationError, match="NEO4J_PASSWORD"):
        Settings(_env_file=None, environment="production", neo4j_password="changeme")  # type: ignore[call-arg]
    ok = Settings(_env_file=None, environment="production", neo4j_password="s3cr3t-xyz")  # type: ignore[call-arg]
    assert ok.environment == "production"


def test_env_example_documents_every_setting() -> None:
    root = Path(__file__).resolve().parents[2]
    example = (root / ".env.example").read_text()
    readme = (root / "README.md").read_text()
    documented = {line.split("=", 1)[0].lstrip("# ").strip() for line in example.splitlines() if "=" in line}
    for name in Settings.model_fields:
        assert name.upper() in documented, f"{name.upper()} missing from .env.example"
        assert f"`{name.upper()}`" in readme, f"{name.upper()} missing from the README config table"
