"""No Docker engine here: check the compose file and Dockerfile by parsing them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from service.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


def test_services_and_healthchecks() -> None:
    services = compose()["services"]
    assert set(services) == {"redis", "qdrant", "neo4j", "api", "worker"}
    for name, svc in services.items():
        assert "healthcheck" in svc and svc["healthcheck"]["test"], f"{name} has no healthcheck"
    assert services["neo4j"]["image"].startswith("neo4j:5.26")
    assert services["api"]["ports"] == ["127.0.0.1:8199:8199"]  # not on every interface
    assert services["api"]["environment"]["AUTH_MODE"] == "keys"


def test_redis_is_durable_and_never_evicts_jobs() -> None:
    cmd = " ".join(compose()["services"]["redis"]["command"])
    assert "--appendonly yes" in cmd
    assert "--maxmemory-policy noeviction" in cmd


def test_app_env_is_wired_to_the_services_and_known_settings() -> None:
    services = compose()["services"]
    known = {name.upper() for name in Settings.model_fields}
    for name in ("api", "worker"):
        env = services[name]["environment"]
        assert env["REDIS_URL"] == "redis://redis:6379"
        assert env["QDRANT_URL"] == "http://qdrant:6333"
        assert env["NEO4J_URI"].endswith("neo4j:7687")
        assert set(env) <= known, set(env) - known
        deps = services[name]["depends_on"]
        assert all(deps[s]["condition"] == "service_healthy" for s in ("redis", "qdrant", "neo4j"))
    assert services["api"]["environment"]["EMBEDDED_WORKER"] == "false"
    assert services["worker"]["command"] == ["python", "-m", "worker"]
    # the worker and the API share one password with Neo4j's own auth setting
    assert "NEO4J_PASSWORD" in services["neo4j"]["environment"]["NEO4J_AUTH"]


def test_dockerfile_is_multistage_and_non_root() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert text.count("FROM ") >= 2
    assert "AS builder" in text and "COPY --from=builder" in text
    user_lines = [line for line in text.splitlines() if line.startswith("USER ")]
    assert user_lines and user_lines[-1] != "USER root"
    assert "EXPOSE 8199" in text
