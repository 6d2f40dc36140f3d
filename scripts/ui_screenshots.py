"""Regenerate the console's screenshots in docs/ui/ (shown in the README).

Starts `python -m service` on a free port (AUTH_MODE=keys, its own queue and data directory, the default local
embedder) on the Redis and Neo4j of REDIS_URL / NEO4J_URI (start them with scripts/dev.sh or scripts/lib.sh),
writes a small demo user's memories through the API, and photographs each page with headless chromium (Debian's
chromium and chromium-driver: `source scripts/lib.sh; ensure_chromium`). PNGs are kept under ~200 KB each.

    .venv/bin/python scripts/ui_screenshots.py [--out docs/ui]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
from selenium import webdriver
from selenium.webdriver.chrome.service import Service as ChromeService
from selenium.webdriver.common.by import By

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from service.core.auth import ApiKeyStore  # noqa: E402
from service.core.redis_client import connect_redis  # noqa: E402
from service.core.settings import load_settings  # noqa: E402

USER = "demo-user"
DEMO = [
    ("I prefer dark mode in every editor", "preference", None),
    ("I work with Jon Smith on the React app.", "personal_fact", None),
    ("I work with Jon on the billing app.", "personal_fact", None),
    ("The billing service uses Postgres 16 and deploys to Fly.io", "tech_stack", "billing"),
    ("Use 4 spaces for indentation in Python files", "convention", "billing"),
    ("We decided to move the queue from Celery to ARQ in March", "decision", "billing"),
    ("Alice Chen leads the payments team in Berlin", "domain_knowledge", None),
    ('A note with markup stays text: <script>alert(1)</script> "><img src=x onerror=alert(1)>', "interaction", None),
]
# each page at 1280 px; those a phone reads most at 390 px too (the browser tests check both widths)
PAGES = [("memories", "/ui/memories", 1280), ("memories-390", "/ui/memories", 390),
         ("search", "/ui/search?q=which+database+does+billing+use&project_id=billing", 1280), ("memory", None, 1280),
         ("memory-390", None, 390), ("graph", "/ui/graph", 1280), ("communities", "/ui/communities", 1280),
         ("review", "/ui/review", 1280), ("activity", "/ui/activity", 1280), ("activity-390", "/ui/activity", 390),
         ("health", "/ui/health", 1280), ("health-390", "/ui/health", 390), ("keys", "/ui/keys", 1280),
         ("docs", "/docs", 1280), ("login", "/ui/login", 1280)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(url: str, proc: subprocess.Popen[bytes], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the service exited with {proc.returncode}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code in (200, 503):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit("the service did not start")


def ended(c: httpx.Client, task: str) -> dict[str, object]:
    for _ in range(300):
        status: dict[str, object] = c.get(f"/v1/memories/status/{task}").json()
        if status["status"] in ("completed", "failed"):
            break
        time.sleep(0.1)
    return status


def seed(url: str, key: str) -> str:
    """The demo memories, then a rebuild of the user's communities; returns one memory id (for the memory page)."""
    first = ""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
        for content, category, project in DEMO:
            body = {"user_id": USER, "content": content, "category": category}
            if project:
                body["project_id"] = project
            status = ended(c, c.post("/v1/memories/raw", json=body).json()["task_id"])
            if "Postgres" in content:
                first = status["result"]["memories"][0]["id"]  # type: ignore[index]
        ended(c, c.post("/v1/graph/communities/rebuild", json={"user_id": USER}).json()["task_id"])
    return first


def shoot(url: str, key: str, memory_id: str, out: Path) -> None:
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--hide-scrollbars"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(options=opts, service=ChromeService(executable_path="/usr/bin/chromedriver"))
    try:
        driver.get(url + "/ui/login")
        driver.find_element(By.ID, "api_key").send_keys(key)
        driver.find_element(By.ID, "user_id").send_keys(USER)
        driver.find_element(By.ID, "sign-in").click()
        time.sleep(0.5)
        out.mkdir(parents=True, exist_ok=True)
        for name, path, width in PAGES:
            driver.set_window_size(width, 900 if width > 400 else 780)
            if name == "login":
                driver.delete_all_cookies()
            driver.get(url + (path or f"/ui/memories/{memory_id}"))
            time.sleep(2.5 if name in ("graph", "docs") else 0.6)
            target = out / f"{name}.png"
            target.write_bytes(driver.get_screenshot_as_png())
            shown = target.resolve().relative_to(ROOT) if target.resolve().is_relative_to(ROOT) else target
            print(f"{shown}: {target.stat().st_size // 1024} KB", file=sys.stderr)
    finally:
        driver.quit()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "ui")
    args = parser.parse_args()
    queue = f"screens:{uuid.uuid4().hex[:8]}"
    settings = load_settings(arq_queue_name=queue)  # REDIS_URL etc. from the environment / .env

    async def admin_key() -> str:
        redis = await connect_redis(settings.redis)
        try:
            return (await ApiKeyStore(redis, settings.redis).create("ops", "screenshots", admin=True))[1]
        finally:
            await redis.aclose()

    key = asyncio.run(admin_key())
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(port), "AUTH_MODE": "keys", "ARQ_QUEUE_NAME": queue,
               "DATA_DIR": data, "LOG_LEVEL": "WARNING"}
        proc = subprocess.Popen([sys.executable, "-m", "service"], cwd=ROOT, env=env)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_for(url, proc)
            shoot(url, key, seed(url, key), args.out)
        finally:
            proc.terminate()
            proc.wait(60)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
