"""The web console in a real browser (Debian's chromium through chromedriver) against `python -m service` on the
test stack: /docs and /redoc render offline, sign-in, search with signals, an edit followed to its end, a delete,
the review queue with a merge and its undo, the graph's node count, inert XSS payloads, CSRF, tenants, and every
/ui route behind the session."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service as ChromeService
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from scripts.bench.procs import stack_env, start_service, stop
from service.app import create_app
from service.core.auth import ApiKeyStore
from service.core.redis_client import connect_redis
from service.tasks.functions import FUNCTIONS
from service.tasks.jobs import RawJob
from service.tasks.queue import TaskQueue
from tests.conftest import make_settings, unique

T = TypeVar("T")
XSS = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>']


@dataclass
class Console:
    url: str
    keys: dict[str, str]
    users: dict[str, str]
    queue: str
    tmp: Path

    def api(self, who: str) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.keys[who]}"}, timeout=30)

    def write(self, who: str, content: str, category: str = "preference") -> str:
        with self.api(who) as c:
            resp = c.post("/v1/memories/raw", json={"content": content, "category": category})
            assert resp.status_code == 202, resp.text
            task = resp.json()["task_id"]
            done = wait(lambda: _finished(c.get(f"/v1/memories/status/{task}").json()))
            assert done["status"] == "completed", done
            return str(done["result"]["memories"][0]["id"])


def _finished(body: dict[str, Any]) -> dict[str, Any] | None:
    return body if body["status"] in ("completed", "failed") else None


def wait(probe: Callable[[], T | None], timeout: float = 30, what: str = "condition") -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached within {timeout}s")


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    tmp = tmp_path_factory.mktemp("console")
    queue = unique("test:console")
    env = stack_env(tmp / "data", queue, AUTH_MODE="keys", RATE_LIMIT_READS_PER_MINUTE="0",
                    RATE_LIMIT_WRITES_PER_MINUTE="0", DEDUP_CRON_ENABLED="false", RECONCILE_CRON_ENABLED="false")
    users = {"a": unique("ca"), "b": unique("cb")}

    async def make_keys() -> dict[str, str]:
        settings = make_settings(tmp, arq_queue_name=queue)
        redis = await connect_redis(settings.redis)
        try:
            store = ApiKeyStore(redis, settings.redis)
            return {"a": (await store.create(users["a"], "console a"))[1],
                    "b": (await store.create(users["b"], "console b"))[1],
                    "admin": (await store.create("ops", "console admin", admin=True))[1]}
        finally:
            await redis.aclose()

    keys = asyncio.run(make_keys())
    proc, port = start_service(env, tmp / "service.log")
    try:
        yield Console(f"http://127.0.0.1:{port}", keys, users, queue, tmp)
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1440,1000", "--disable-extensions", "--no-first-run"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the page's console, CSP violations included
    driver = webdriver.Chrome(options=opts, service=ChromeService(executable_path="/usr/bin/chromedriver"))
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


def sign_in(browser: WebDriver, console: Console, who: str, user: str = "") -> None:
    browser.delete_all_cookies()
    browser.get(console.url + "/ui/login")
    browser.find_element(By.ID, "api_key").send_keys(console.keys[who])
    if user:
        browser.find_element(By.ID, "user_id").send_keys(user)
    browser.find_element(By.ID, "sign-in").click()
    wait(lambda: browser.current_url.endswith("/ui/memories"), what="the memories page after sign-in")


def text_of(browser: WebDriver, element_id: str) -> str:
    """The element's text, or "" while it is absent (or being swapped by htmx)."""
    try:
        found = browser.find_elements(By.ID, element_id)
        return found[0].text if found else ""
    except StaleElementReferenceException:
        return ""


def no_alert(browser: WebDriver) -> bool:
    try:
        browser.switch_to.alert  # noqa: B018 (raises when there is none)
    except NoAlertPresentException:
        return True
    return False


def rendered_png_is_not_blank(browser: WebDriver) -> None:
    """The page's screenshot is far larger than a white page's (a blank PNG compresses to almost nothing)."""
    shot = browser.get_screenshot_as_png()
    browser.execute_script("document.body.innerHTML = ''; document.body.style.background = '#fff'")
    blank = browser.get_screenshot_as_png()
    assert len(shot) > 5 * len(blank), (len(shot), len(blank))


def test_docs_and_redoc_render_from_vendored_files(console: Console, browser: WebDriver) -> None:
    """Today's failure: FastAPI's /docs loads Swagger UI from a CDN, a white page offline. Every resource these
    pages load must come from the service itself."""
    browser.get(console.url + "/docs")
    wait(lambda: browser.find_elements(By.CSS_SELECTOR, ".swagger-ui .info .title"), what="Swagger UI's title")
    assert "Memory platform" in browser.find_element(By.CSS_SELECTOR, ".swagger-ui .info .title").text
    assert browser.find_elements(By.CSS_SELECTOR, ".opblock")  # the operations are listed
    resources = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert resources and all(r.startswith(console.url) for r in resources), resources
    rendered_png_is_not_blank(browser)

    browser.get(console.url + "/redoc")
    wait(lambda: browser.find_elements(By.CSS_SELECTOR, ".api-content h1"), what="Redoc's title")
    assert "Memory platform" in browser.find_element(By.CSS_SELECTOR, ".api-content h1").text
    # Redoc's "powered by" badge names an image on its vendor's CDN: the page's CSP blocks it (nothing is fetched)
    resources = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => [e.name, e.responseStatus, e.transferSize])")
    assert any(name.endswith("redoc.standalone.js") for name, _, _ in resources)
    assert all((status, size) == (0, 0) for name, status, size in resources if not name.startswith(console.url)), \
        resources


def test_sign_in_search_with_signals_edit_and_delete(console: Console, browser: WebDriver) -> None:
    mid = console.write("a", "I drink oolong tea every morning at seven")
    sign_in(browser, console, "a")
    assert text_of(browser, "acting-user") == console.users["a"]
    assert console.keys["a"] not in browser.page_source  # the key is never rendered back

    browser.get(console.url + "/ui/search?q=oolong+tea")
    results = browser.find_elements(By.CSS_SELECTOR, "#results .result")
    assert results and "oolong" in results[0].find_element(By.CSS_SELECTOR, ".content").text
    signals = results[0].find_elements(By.CSS_SELECTOR, ".signals li[data-retriever]")
    assert {s.get_attribute("data-retriever") for s in signals} >= {"dense", "lexical"}
    assert any("shares words with the query" in s.text and "ranked 1st" in s.text for s in signals)

    # an edit, followed to its end: the task page shows the new content
    browser.get(f"{console.url}/ui/memories/{mid}")
    area = browser.find_element(By.ID, "e-content")
    area.clear()
    area.send_keys("I drink green tea every morning at seven")
    browser.find_element(By.ID, "save").click()
    wait(lambda: text_of(browser, "task-status") == "completed", what="the edit's task completed")
    assert wait(lambda: text_of(browser, "task-memory")) == "I drink green tea every morning at seven"
    browser.get(f"{console.url}/ui/memories/{mid}")
    assert text_of(browser, "memory-content") == "I drink green tea every morning at seven"

    # a delete, with its confirm step
    browser.find_element(By.ID, "delete-link").click()
    browser.find_element(By.ID, "confirm-delete").click()
    wait(lambda: text_of(browser, "task-status") == "completed", what="the delete's task completed")
    browser.get(f"{console.url}/ui/memories/{mid}")
    assert browser.find_element(By.TAG_NAME, "h1").text == "404"
    with console.api("a") as c:
        assert c.get(f"/v1/memories/{mid}").status_code == 404


def test_the_memory_page_lists_newest_first(console: Console, browser: WebDriver) -> None:
    written = [console.write("a", f"Newest-first check, note {i}: written in turn", "decision") for i in range(3)]
    sign_in(browser, console, "a")
    browser.get(console.url + "/ui/memories")
    links = [a.get_attribute("href") or "" for a in browser.find_elements(By.CSS_SELECTOR, "li.memory a.content")]
    assert [link.rsplit("/", 1)[-1] for link in links[:3]] == written[::-1]


def test_review_queue_confirm_then_unmerge(console: Console, browser: WebDriver) -> None:
    console.write("b", "I work with Jon Smith on the React app.", "personal_fact")
    console.write("b", "I work with Jon on the billing app.", "personal_fact")
    sign_in(browser, console, "b")
    browser.get(console.url + "/ui/review")
    pairs = browser.find_elements(By.CSS_SELECTOR, "#pairs .pair")
    assert len(pairs) == 1 and "Jon" in pairs[0].text and "Jon Smith" in pairs[0].text
    assert "score" in pairs[0].text
    assert browser.find_element(By.ID, "merged").text == "none"
    pairs[0].find_element(By.CSS_SELECTOR, "button[value=confirm]").click()
    wait(lambda: browser.find_elements(By.ID, "queue-empty"), what="the queue empty after the merge")
    merged = browser.find_element(By.ID, "merged").text
    assert "Jon → Jon Smith" in merged
    with console.api("b") as c:
        assert c.get("/v1/graph/stats").json()["merged_entities"] == 1
    browser.find_element(By.CSS_SELECTOR, "#merged button").click()  # unmerge
    wait(lambda: browser.find_elements(By.CSS_SELECTOR, "#pairs .pair"), what="the pair back in the queue")
    assert browser.find_element(By.ID, "merged").text == "none"
    with console.api("b") as c:
        stats = c.get("/v1/graph/stats").json()
        assert stats["merged_entities"] == 0 and stats["same_as"]["pending"] == 1
    # two people of one name, kept apart by their roles (docs/identity.md, Meanings): the reviewer sees the roles
    console.write("b", "I work with John Smith, the plumber, on the boiler.", "personal_fact")
    console.write("b", "I work with John Smith, our VP of Sales, on the forecast.", "personal_fact")
    browser.get(console.url + "/ui/review")
    [homonyms] = [p for p in browser.find_elements(By.CSS_SELECTOR, "#pairs .pair") if "other_role" in p.text]
    assert "plumber" in homonyms.text and "vp of sales" in homonyms.text
    homonyms.find_element(By.CSS_SELECTOR, ".side a").click()
    assert text_of(browser, "entity-roles") in ("plumber", "vp of sales")


def test_graph_view_draws_the_users_entities(console: Console, browser: WebDriver) -> None:
    console.write("a", "Alice uses Postgres for the billing service.", "domain_knowledge")
    with console.api("a") as c:
        items = c.get("/v1/graph/nodes", params={"limit": 500}).json()["items"]
        edges = c.get("/v1/graph/edges", params={"limit": 500}).json()["items"]
    live = [n for n in items if not n.get("merged_into")]
    assert 0 < len(live) <= 30  # a small graph: the view draws every entity (the 30 most connected, then neighbours)
    sign_in(browser, console, "a")
    browser.get(console.url + "/ui/graph")
    box = browser.find_element(By.ID, "graph")
    wait(lambda: box.get_attribute("data-ready") == "true", what="cytoscape drawn")
    data = json.loads(browser.find_element(By.ID, "graph-data").get_attribute("textContent") or "{}")
    assert len(data["nodes"]) == len(live) and int(box.get_attribute("data-nodes") or 0) == len(live)
    assert int(box.get_attribute("data-edges") or 0) == len(edges)
    # a search narrows the view to the named entity and its neighbours
    postgres = next(n for n in live if "postgres" in str(n["name"]).lower())
    browser.get(console.url + "/ui/graph?q=postgres")
    box = browser.find_element(By.ID, "graph")
    wait(lambda: box.get_attribute("data-ready") == "true", what="cytoscape drawn")
    data = json.loads(browser.find_element(By.ID, "graph-data").get_attribute("textContent") or "{}")
    around = {e["source_id"] for e in edges if e["target_id"] == postgres["id"]} | {
        e["target_id"] for e in edges if e["source_id"] == postgres["id"]}
    assert {n["id"] for n in data["nodes"]} == {postgres["id"]} | around
    assert int(box.get_attribute("data-nodes") or 0) == len(data["nodes"])
    # a click asks for the node's neighbourhood: the facts around it, nothing of another user
    c, _ = _session(console, "a")
    with contextlib.closing(c):
        part = c.get(f"/ui/graph/neighbours/{postgres['id']}").json()
        assert {n["id"] for n in part["nodes"]} == {postgres["id"]} | around
        assert len(part["edges"]) == len([e for e in edges if postgres["id"] in (e["source_id"], e["target_id"])])
    c, _ = _session(console, "b")
    with contextlib.closing(c):
        assert c.get(f"/ui/graph/neighbours/{postgres['id']}").json() == {"nodes": [], "edges": []}


def test_a_memory_page_shows_its_entities_and_its_facts_with_history(console: Console, browser: WebDriver) -> None:
    first = console.write("b", "I live in Lisbon", "personal_fact")
    console.write("b", "I live in Porto", "personal_fact")  # lives_in holds one value: Lisbon's fact is superseded
    sign_in(browser, console, "b")
    browser.get(f"{console.url}/ui/memories/{first}")
    entities = browser.find_element(By.ID, "memory-entities").text
    assert "Lisbon" in entities
    rows = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#memory-facts tbody tr")]
    assert any("Lisbon" in r and r.endswith("superseded") for r in rows), rows
    browser.find_element(By.LINK_TEXT, "Lisbon").click()  # the entity's page: its facts over time
    assert browser.find_element(By.ID, "entity-name").text == "Lisbon"


def test_xss_payloads_stay_text(console: Console, browser: WebDriver) -> None:
    ids = [console.write("a", f"payload {p}") for p in XSS]
    sign_in(browser, console, "a")
    browser.get(console.url + "/ui/memories")
    listed = browser.find_element(By.ID, "memory-list").text
    assert all(p in listed for p in XSS)
    assert no_alert(browser) and not browser.find_elements(By.CSS_SELECTOR, "#memory-list img")
    for mid, payload in zip(ids, XSS, strict=True):
        browser.get(f"{console.url}/ui/memories/{mid}")
        assert text_of(browser, "memory-content") == f"payload {payload}"
        assert no_alert(browser) and not browser.find_elements(By.CSS_SELECTOR, "main img")
    browser.get(console.url + "/ui/search?q=payload")
    assert no_alert(browser) and XSS[0] in browser.find_element(By.ID, "results").text


def _session(console: Console, who: str) -> tuple[httpx.Client, str]:
    """A signed-in console session outside the browser, and its CSRF token."""
    c = httpx.Client(base_url=console.url, timeout=30)
    page = c.get("/ui/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf
    resp = c.post("/ui/login", data={"csrf": csrf.group(1), "api_key": console.keys[who]})
    assert resp.status_code == 303 and resp.headers["location"] == "/ui/memories"
    home = c.get("/ui/user")  # a page every session can open (an admin session has picked no user yet)
    token = re.search(r'name="csrf" value="([^"]+)"', home.text)
    assert token and token.group(1) != csrf.group(1)  # a new token at sign-in
    return c, token.group(1)


def test_a_post_without_the_csrf_token_is_refused(console: Console) -> None:
    mid = console.write("a", "keep me unless the form is genuine")
    c, token = _session(console, "a")
    with contextlib.closing(c):
        for body in ({}, {"csrf": "forged"}):
            resp = c.post(f"/ui/memories/{mid}/delete", data=body)
            assert resp.status_code == 403 and "CSRF" in resp.text
        with console.api("a") as api:
            assert api.get(f"/v1/memories/{mid}").status_code == 200
        assert c.post(f"/ui/memories/{mid}/delete", data={"csrf": token}).status_code == 303
        assert c.post(f"/ui/memories/{mid}/delete", headers={"X-CSRF-Token": token}).status_code in (303, 404)
        # the login form has its own token too
        assert httpx.post(console.url + "/ui/login", data={"api_key": console.keys["a"]}).status_code == 403


def test_another_tenants_memory_and_entity_are_not_found(console: Console) -> None:
    b_memory = console.write("b", "Bob's private note about Carol Danvers", "personal_fact")
    with console.api("b") as api:
        b_entity = api.get("/v1/graph/nodes").json()["items"][0]["id"]
    c, token = _session(console, "a")
    with contextlib.closing(c):
        assert c.get(f"/ui/memories/{b_memory}").status_code == 404
        assert c.get(f"/ui/entities/{b_entity}").status_code == 404
        assert c.post(f"/ui/memories/{b_memory}/edit", data={"csrf": token, "content": "x"}).status_code == 404
        assert c.post(f"/ui/entities/{b_entity}/unmerge", data={"csrf": token}).status_code == 404
        found = c.get("/ui/search", params={"q": "Carol Danvers"})
        assert found.status_code == 200 and "Bob" not in found.text
        assert c.get("/ui/keys").status_code == 403  # a user key manages no keys
    # a user key cannot switch to another user; an admin key can, and sees that user's memory
    c, token = _session(console, "a")
    with contextlib.closing(c):
        assert c.post("/ui/user", data={"csrf": token, "user_id": console.users["b"]}).status_code == 403
    c, token = _session(console, "admin")
    with contextlib.closing(c):
        assert c.post("/ui/user", data={"csrf": token, "user_id": console.users["b"]}).status_code == 303
        assert "Carol Danvers" in c.get(f"/ui/memories/{b_memory}").text


def console_routes(app: FastAPI) -> list[tuple[str, str]]:
    """(method, path) of every /ui route of the app's route table, included routers walked."""
    out, todo = [], list(app.routes)
    while todo:
        route = todo.pop()
        if hasattr(route, "original_router"):  # FastAPI keeps an included router as one entry
            todo += route.original_router.routes
        elif isinstance(route, APIRoute) and route.path.startswith("/ui"):
            out += [(m, route.path) for m in sorted(route.methods or ())]
    return sorted(out)


def test_every_ui_route_needs_a_session(console: Console, tmp_path: Path) -> None:
    """The console's route table, walked without a session: a redirect to the sign-in page (never a page)."""
    routes = console_routes(create_app(make_settings(tmp_path)))
    assert len(routes) >= 25
    open_routes = {("GET", "/ui/login"), ("POST", "/ui/login"), ("GET", "/ui")}
    forged = httpx.Client(base_url=console.url, timeout=30, cookies={"memory_console": "e30.AAAA"})
    with httpx.Client(base_url=console.url, timeout=30) as c, forged:
        for method, path in routes:
            if (method, path) in open_routes:
                continue
            url = re.sub(r"\{\w+\}", "x1", path)
            resp = c.request(method, url, params={"q": "x"} if path.endswith("/search") else None)
            assert resp.status_code == 303 and resp.headers["location"] == "/ui/login", (method, path, resp.text)
            # a forged cookie is no session either
            resp = forged.request(method, url)
            assert resp.status_code == 303, (method, path)
        assert c.get("/ui").status_code == 303
        assert "api_key" in c.get("/ui/login").text


PAGES = ["/ui/memories", "/ui/search?q=tea", "/ui/graph", "/ui/communities", "/ui/review", "/ui/activity", "/ui/health",
         "/ui/keys", "/ui/conversations", "/ui/runs", "/ui/user"]
UNLABELLED = """return [...document.querySelectorAll('input, select, textarea')]
  .filter(e => e.type !== 'hidden' && e.labels.length === 0 && !e.getAttribute('aria-label')).map(e => e.outerHTML)"""


def test_pages_fit_360_px_have_labelled_controls_and_work_by_keyboard(console: Console, browser: WebDriver) -> None:
    console.write("a", "I keep my notes in plain text files")
    sign_in(browser, console, "admin", console.users["a"])
    try:
        for width in (360, 1440):
            browser.set_window_size(width, 900)
            for page in PAGES:
                browser.get(console.url + page)
                assert browser.find_element(By.TAG_NAME, "h1").text not in ("", "403", "404", "500"), page
                overflow = browser.execute_script(
                    "return document.documentElement.scrollWidth - document.documentElement.clientWidth")
                assert overflow <= 0, (width, page, overflow)
                assert browser.execute_script(UNLABELLED) == [], page
        # the keyboard: the skip link comes first, then the navigation; Enter on a link follows it
        browser.get(console.url + "/ui/memories")
        body = browser.find_element(By.TAG_NAME, "body")
        body.send_keys(Keys.TAB)
        assert browser.switch_to.active_element.text == "Skip to content"
        body = browser.switch_to.active_element
        body.send_keys(Keys.TAB)
        body = browser.switch_to.active_element
        assert body.text == "Memories"
        body.send_keys(Keys.TAB)
        browser.switch_to.active_element.send_keys(Keys.ENTER)
        wait(lambda: browser.current_url.endswith("/ui/search"), what="the search page by keyboard")
    finally:
        browser.set_window_size(1440, 1000)


def test_admin_creates_a_key_shown_once_and_revokes_it(console: Console) -> None:
    c, token = _session(console, "admin")
    with contextlib.closing(c):
        user = unique("ck")
        created = c.post("/ui/keys", data={"csrf": token, "user_id": user, "name": "from the console"})
        assert created.status_code == 200 and created.headers["cache-control"] == "no-store"
        secret = re.search(r'value="(msk_[^"]+)"', created.text)
        assert secret
        listed = c.get("/ui/keys").text
        assert user in listed and secret.group(1) not in listed  # shown once
        key_id = secret.group(1).split("_")[1]
        with httpx.Client(base_url=console.url, headers={"Authorization": f"Bearer {secret.group(1)}"}) as api:
            assert api.get("/v1/memories").status_code == 200
            assert c.post(f"/ui/keys/{key_id}/revoke", data={"csrf": token}).status_code == 303
            assert api.get("/v1/memories").status_code == 401
        after = c.get("/ui/keys").text
        assert key_id in after and f"/ui/keys/{key_id}/revoke" not in after  # listed, no longer revocable


async def test_without_keys_a_user_id_signs_in(tmp_path: Path) -> None:
    """AUTH_MODE=none on loopback: the sign-in page asks for a user id, and the session acts for it."""
    from tests.integration.conftest import running_app, write_raw

    user = unique("cn")
    async with running_app(tmp_path) as (client, _):
        await write_raw(client, user_id=user, content="I cycle to work on Fridays", category="preference")
        page = await client.get("/ui/login")
        assert "AUTH_MODE=none" in page.text and 'id="api_key"' not in page.text  # a user id is all it asks
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf
        bad = await client.post("/ui/login", data={"csrf": csrf.group(1), "user_id": "no spaces!"})
        assert bad.status_code == 400
        signed = await client.post("/ui/login", data={"csrf": csrf.group(1), "user_id": user})
        assert signed.status_code == 303
        listed = await client.get("/ui/memories")
        assert "I cycle to work on Fridays" in listed.text and user in listed.text
        assert (await client.get("/ui/memories", params={"scope": "nowhere"})).status_code == 400
        # one rule: without keys the console is an admin session everywhere, as the API is
        activity = await client.get("/ui/activity")
        assert activity.status_code == 200 and 'id="start-dedup"' in activity.text
        keys = await client.get("/ui/keys")
        assert keys.status_code == 200 and 'href="/ui/keys"' in keys.text


def test_admin_starts_a_dedup_dry_run_and_follows_it(console: Console) -> None:
    console.write("a", "I always run the tests before I push")
    console.write("a", "I always run the tests before I push!")
    c, token = _session(console, "a")
    with contextlib.closing(c):
        assert c.post("/ui/activity/dedup", data={"csrf": token}).status_code == 403  # a user key: no
    c, token = _session(console, "admin")
    with contextlib.closing(c):
        assert c.post("/ui/user", data={"csrf": token, "user_id": console.users["a"]}).status_code == 303
        started = c.post("/ui/activity/dedup", data={"csrf": token})
        assert started.status_code == 303 and started.headers["location"].startswith("/ui/tasks/")
        done = wait(lambda: (lambda page: page if 'data-status="completed"' in page else None)(
            c.get(started.headers["location"] + "&fragment=true").text), what="the dry run completed")
        report = re.search(r'id="task-next" href="(/ui/activity/[^"]+)"', done)
        assert report
        page = c.get(report.group(1))
        assert page.status_code == 200 and "&#34;dry_run&#34;: true" in page.text and console.users["a"] in page.text
        assert report.group(1).rsplit("/", 1)[1] in c.get("/ui/activity").text


def test_activity_lists_the_users_recent_tasks_with_status_and_error(console: Console, browser: WebDriver) -> None:
    """The Activity page's recent tasks (the per-user task index): a completed write and a failed one, newest first,
    the error shown, each linked to its task page; another user's session lists neither."""
    with console.api("b") as c:
        ok = c.post("/v1/memories/raw", json={"content": "I brew green tea at 80 degrees", "category": "preference"})
        assert ok.status_code == 202, ok.text
        ok_id = ok.json()["task_id"]
        assert wait(lambda: _finished(c.get(f"/v1/memories/status/{ok_id}").json()))["status"] == "completed"

    async def enqueue_unstorable() -> str:  # a job the worker cannot store (no such scope): it ends failed
        settings = make_settings(console.tmp, arq_queue_name=console.queue)
        redis = await connect_redis(settings.redis)
        try:
            job = RawJob(user_id=console.users["b"], scope="galactic", category="preference", content="x")
            return await TaskQueue(redis, settings.redis, FUNCTIONS).enqueue(job, {"probe": unique("p")})
        finally:
            await redis.aclose()

    bad_id = asyncio.run(enqueue_unstorable())
    with console.api("b") as c:
        failed = wait(lambda: _finished(c.get(f"/v1/memories/status/{bad_id}").json()))
    assert failed["status"] == "failed" and "galactic" in failed["error"]

    sign_in(browser, console, "b")
    browser.get(console.url + "/ui/activity")
    rows = {r.get_attribute("data-task"): r for r in browser.find_elements(By.CSS_SELECTOR, "#tasks tbody tr")}
    order = list(rows)
    assert order.index(bad_id) < order.index(ok_id)  # newest first
    bad_cells = [td.text for td in rows[bad_id].find_elements(By.TAG_NAME, "td")]
    assert bad_cells[1] == "raw" and bad_cells[2] == "failed" and "galactic" in bad_cells[3]
    ok_cells = [td.text for td in rows[ok_id].find_elements(By.TAG_NAME, "td")]
    assert ok_cells[1] == "raw" and ok_cells[2] == "completed" and ok_cells[3] == ""
    rows[bad_id].find_element(By.TAG_NAME, "a").click()  # the task's own page: its error
    wait(lambda: f"/ui/tasks/{bad_id}" in browser.current_url, what="the task page")
    assert "galactic" in wait(lambda: text_of(browser, "task-error"), what="the task page's error")
    c, _ = _session(console, "a")
    with contextlib.closing(c):
        page = c.get("/ui/activity").text
        assert ok_id not in page and bad_id not in page


def test_communities_page_lists_the_users_communities_with_their_members(
        console: Console, browser: WebDriver) -> None:
    """The communities GET /v1/graph/communities lists, with their summaries; a member links to its entity page."""
    user = unique("cc")

    def ended(c: httpx.Client, resp: httpx.Response) -> dict[str, Any]:
        assert resp.status_code == 202, resp.text
        task = resp.json()["task_id"]
        return wait(lambda: _finished(c.get(f"/v1/memories/status/{task}").json()))

    with console.api("admin") as c:
        pairs = [("Ann", "Bob"), ("Bob", "Cid"), ("Ann", "Cid"), ("Dan", "Eve")]  # a triangle and a pair
        for subject, obj in pairs:
            fact = {"user_id": user, "subject": subject, "predicate": "knows", "object": obj}
            assert ended(c, c.post("/v1/graph/facts", json=fact))["status"] == "completed"
        assert ended(c, c.post("/v1/graph/communities/rebuild", json={"user_id": user}))["status"] == "completed"
        listed = c.get("/v1/graph/communities", params={"user_id": user}).json()["items"]
    assert sorted(len(x["members"]) for x in listed) == [2, 3]

    sign_in(browser, console, "admin", user)
    browser.get(console.url + "/ui/communities")
    sections = browser.find_elements(By.CSS_SELECTOR, "#communities section")
    assert [s.get_attribute("data-community") for s in sections] == [x["id"] for x in listed]
    for section, item in zip(sections, listed, strict=True):
        links = section.find_elements(By.CSS_SELECTOR, ".members a")
        assert [a.text for a in links] == [m["name"] for m in item["members"]]
        assert [(a.get_attribute("href") or "").rsplit("/", 1)[1] for a in links] == [m["id"] for m in item["members"]]
        assert section.find_element(By.CLASS_NAME, "summary").text.startswith(item["summary"])
    browser.find_element(By.LINK_TEXT, "Ann").click()
    assert browser.find_element(By.ID, "entity-name").text == "Ann"
    c2, _ = _session(console, "b")  # another user's session: none of them
    with contextlib.closing(c2):
        page = c2.get("/ui/communities").text
        assert all(x["id"] not in page for x in listed) and "Ann" not in page


def console_errors(browser: WebDriver) -> list[str]:
    """The browser console's errors since the last call (a CSP violation is one)."""
    entries: list[dict[str, Any]] = cast(Any, browser).get_log("browser")  # chromedriver's log, not in the stubs
    return [e["message"] for e in entries if e["level"] == "SEVERE"]


def test_no_page_logs_an_error_in_the_browser_console(console: Console, browser: WebDriver) -> None:
    """Every page, the graph's included (cytoscape adds a <style> element unless the page already has one with its
    id: the CSP, style-src 'self', refused it on every load)."""
    mid = console.write("a", "Alice deploys the billing service with Terraform.", "domain_knowledge")
    sign_in(browser, console, "admin", console.users["a"])
    with console.api("a") as c:
        [entity, *_] = c.get("/v1/graph/nodes", params={"limit": 50}).json()["items"]
    console_errors(browser)
    for page in [*PAGES, f"/ui/memories/{mid}", f"/ui/entities/{entity['id']}", "/ui/graph?q=terraform"]:
        browser.get(console.url + page)
        if page.startswith("/ui/graph"):
            wait(lambda: browser.find_element(By.ID, "graph").get_attribute("data-ready") == "true",
                 what="cytoscape drawn")
        assert console_errors(browser) == [], page
    # the rule cytoscape wanted is there all the same, from the page's own sheet
    assert browser.find_element(By.ID, "graph").value_of_css_property("position") == "relative"


def test_empty_pages_say_what_fills_them_and_link_to_how(console: Console, browser: WebDriver) -> None:
    sign_in(browser, console, "admin", unique("empty"))  # a user with nothing stored
    for page, box in (("/ui/graph", "graph-empty"), ("/ui/memories", "memories-empty"), ("/ui/runs", "runs-empty"),
                      ("/ui/conversations", "conversations-empty"), ("/ui/communities", "communities-empty")):
        browser.get(console.url + page)
        text = text_of(browser, box)
        assert len(text) > 60, (page, text)
        assert browser.find_elements(By.CSS_SELECTOR, f"#{box} a[href='/docs']"), page
    browser.get(console.url + "/ui/graph")
    assert "fills as memories are stored" in text_of(browser, "graph-empty")
    browser.get(console.url + "/ui/review")
    assert "resembles" in text_of(browser, "queue-empty")
    browser.get(console.url + "/ui/memories?category=decision")  # a filter that matches nothing: said so
    assert text_of(browser, "memories-empty") == "No memories match these filters."


MID_WORD_BREAKS = """
const bad = [];
for (const el of document.querySelectorAll(arguments[0])) {
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  let top = null, last = '', node;
  while ((node = walker.nextNode())) {
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange(); range.setStart(node, i); range.setEnd(node, i + 1);
      const rects = range.getClientRects(); if (!rects.length) continue;
      const y = Math.round(rects[0].top), ch = node.data[i];
      if (top !== null && y > top + 2 && !/[\\s_{,=]/.test(last) && !/\\s/.test(ch)) bad.push(el.textContent);
      top = y; last = ch;
    }
  }
}
return bad;"""


def test_health_reads_as_lists_and_fits_390_px(console: Console, browser: WebDriver) -> None:
    sign_in(browser, console, "a")
    try:
        browser.set_window_size(390, 900)
        browser.get(console.url + "/ui/health")
        checks = {li.get_attribute("data-check"): li.text for li in
                  browser.find_elements(By.CSS_SELECTOR, "#health-checks li")}
        assert checks == {"redis": "redis ok", "vector_store": "vector store ok", "graph_store": "graph store ok",
                          "event_loop": "event loop ok", "queue": "queue ok"}
        main = browser.find_element(By.ID, "main").text
        assert "{'" not in main and "':" not in main  # no Python dict anywhere
        graph = browser.find_element(By.ID, "health-graph").text
        assert "same as" in graph and "pending" in graph
        overflow = browser.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, overflow
        assert browser.execute_script(MID_WORD_BREAKS, "#main dt, #health-checks .label, #main h2") == []
    finally:
        browser.set_window_size(1440, 1000)


def _memory_of(c: httpx.Client, task: str) -> str:
    done = wait(lambda: _finished(c.get(f"/v1/memories/status/{task}").json()))
    return str(done["result"]["memories"][0]["id"])


def test_an_entitys_page_lists_the_memories_that_mention_it(console: Console, browser: WebDriver) -> None:
    user = unique("ce")
    sign_in(browser, console, "admin", user)
    with console.api("admin") as c:
        ids = []
        for content in ("Bea maintains the Grafana dashboards.", "Bea moved the Grafana alerts to Slack."):
            resp = c.post("/v1/memories/raw", json={"user_id": user, "content": content, "category": "personal_fact"})
            assert resp.status_code == 202, resp.text
            ids.append(_memory_of(c, resp.json()["task_id"]))
        items = c.get("/v1/graph/nodes", params={"user_id": user, "limit": 50}).json()["items"]
    grafana = next(n for n in items if n["name"].lower() == "grafana")
    browser.get(f"{console.url}/ui/entities/{grafana['id']}")
    links = browser.find_elements(By.CSS_SELECTOR, "#entity-memories a")
    assert [str(a.get_attribute("href")).rsplit("/", 1)[1] for a in links] == ids[::-1]  # newest first
    assert links[0].text == "Bea moved the Grafana alerts to Slack."
    links[1].click()
    assert text_of(browser, "memory-content") == "Bea maintains the Grafana dashboards."
    c2, _ = _session(console, "b")  # another user's session: the entity is not theirs
    with contextlib.closing(c2):
        assert c2.get(f"/ui/entities/{grafana['id']}").status_code == 404


def test_tables_dates_filters_and_labels_read_well_at_1280_and_390_px(console: Console, browser: WebDriver) -> None:
    """Activity and an entity's "Facts over time" never break a word inside it; the Memories text box filters (only
    what holds one of its words); a memory's page shows its sensitivity and the day it was said; the activity page
    says how long task records last in words; labels look unlike values; the favicon answers."""
    user = unique("cr")
    with console.api("admin") as c:
        tea = c.post("/v1/memories/raw", json={"user_id": user, "content": "I brew green tea at 80 degrees",
                                               "category": "preference"}).json()["task_id"]
        work = c.post("/v1/memories/raw", json={"user_id": user, "category": "personal_fact",
                                                "content": "Our team works at Acme Corporation in Rotterdam"}
                      ).json()["task_id"]
        tea_id, work_id = _memory_of(c, tea), _memory_of(c, work)
        icon = c.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    sign_in(browser, console, "admin", user)
    browser.get(console.url + f"/ui/memories/{work_id}")
    links = browser.find_elements(By.CSS_SELECTOR, "#memory-entities a")
    assert links, browser.find_element(By.ID, "memory-entities").text
    entity = str(links[0].get_attribute("href")).rsplit("/", 1)[1]
    try:
        for width in (1280, 390):
            browser.set_window_size(width, 900)
            browser.get(console.url + "/ui/activity")
            assert "task records are kept 7 days" in browser.find_element(By.ID, "main").text
            assert browser.execute_script(MID_WORD_BREAKS, "#tasks td, #tasks th") == [], width
            browser.get(console.url + f"/ui/entities/{entity}")
            assert browser.execute_script(MID_WORD_BREAKS, "#main td, #main th") == [], width
            browser.get(console.url + "/ui/memories?text=tea")
            listed = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#memory-list .content")]
            assert listed == ["I brew green tea at 80 degrees"], listed
            assert "hold a word" in browser.find_element(By.ID, "filter-hint").text
            browser.get(console.url + f"/ui/memories/{tea_id}")
            assert browser.find_element(By.ID, "memory-sensitivity").text in ("public", "internal", "private",
                                                                              "secret")
            assert len(browser.find_element(By.ID, "memory-said").text) == 10  # YYYY-MM-DD
            assert "Valid from" not in browser.find_element(By.ID, "main").text
            weights = browser.execute_script(
                "const dt = document.querySelector('dl.facts dt'), dd = document.querySelector('dl.facts dd');"
                "return [getComputedStyle(dt).fontWeight, getComputedStyle(dd).fontWeight];")
            assert weights[0] != weights[1], weights
    finally:
        browser.set_window_size(1440, 1000)
