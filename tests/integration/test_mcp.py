"""The MCP server through the official MCP client, against the real stack.

One `python -m service` with MCP_TRANSPORT=http (embedded profile, in-process worker) serves both
transports: streamable HTTP at /mcp/ on the API itself, and `python -m service.mcp` (stdio), spawned
by the client per test, which reaches the same API over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from scripts.bench.procs import ROOT, free_port, start_service, stop
from service.core.domain import CATEGORIES
from tests.conftest import unique

TRANSPORTS = ["http", "stdio"]
TOOLS = {
    "recall_memories": {"query", "user_id"},
    "remember": {"content", "user_id", "category"},
    "remember_many": {"facts", "user_id"},
    "remember_conversation": {"messages", "user_id"},
    "get_project_context": {"user_id"},
    "search_knowledge_graph": {"query", "user_id"},
    "list_memories": {"user_id"},
    "delete_memories": {"user_id"},
    "get_task_status": {"task_id"},
    "list_duplicate_entities": {"user_id"},
    "review_duplicate": {"user_id", "source_id", "target_id", "confirm"},
    "merge_entities": {"user_id", "source_id", "target_id"},
    "start_task": {"task", "user_id"},
    "record_task_step": {"run_id", "user_id", "seq", "action"},
    "finish_task": {"run_id", "user_id", "success"},
    "recall_similar_tasks": {"query", "user_id"},
    "update_memory": {"memory_id", "content", "user_id"},
    # the graph as an API (tests/integration/test_mcp_graph.py)
    "add_entity": {"user_id", "name"},
    "add_relationship": {"user_id", "source", "predicate", "target"},
    "add_fact": {"user_id", "subject", "predicate", "object"},
    "get_facts_about": {"user_id", "name"},
    "query_graph": {"user_id"},
}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("mcp")
    env = {
        "REDIS_URL": os.environ["TEST_REDIS_URL"],
        "NEO4J_URI": os.environ["TEST_NEO4J_URI"],
        "NEO4J_DATABASE": os.environ.get("TEST_NEO4J_DATABASE", "memory"),
        "DATA_DIR": str(tmp / "data"),
        "ARQ_QUEUE_NAME": unique("test:mcpq"),
        "EMBEDDER": "hash",
        "MCP_TRANSPORT": "http",
        "MCP_TOOLSETS": "all",
    }
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("GOOGLE_API_KEY", raising=False)  # the offline extractor, whatever the caller's env
        proc, port = start_service(env, tmp / "service.log")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


@contextlib.asynccontextmanager
async def connect(transport: str, api_url: str, toolsets: str = "all") -> AsyncIterator[Client]:
    if transport == "http":
        conn: Any = streamable_http_client(f"{api_url}/mcp/")
    else:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "service.mcp"], cwd=str(ROOT),
            env={"MEMORY_API_URL": api_url, "LOG_FORMAT": "json", "LOG_LEVEL": "WARNING", "MCP_TOOLSETS": toolsets},
        )
        conn = stdio_client(params)
    async with Client(conn, read_timeout_seconds=60) as client:
        yield client


def text(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool call that must succeed; returns its structured content."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text(result)
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


async def fails(client: Client, tool: str, **arguments: Any) -> str:
    """A tool call that must come back as a tool error; returns its text."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result
    return text(result)


async def remember(client: Client, **arguments: Any) -> str:
    """remember with wait=true; returns the stored memory's id."""
    out = await call(client, "remember", wait=True, **arguments)
    assert out["status"] == "completed", out
    [memory] = out["result"]["memories"]
    return str(memory["id"])


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_tools_and_schemas(api: str, transport: str) -> None:
    async with connect(transport, api) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == set(TOOLS)
        for name, required in TOOLS.items():
            tool = tools[name]
            assert tool.description and len(tool.description) > 40, name
            assert tool.input_schema["type"] == "object"
            assert set(tool.input_schema.get("required", [])) == required, name
            for prop, schema in tool.input_schema["properties"].items():
                assert schema.get("description"), f"{name}.{prop} has no description"
            # compact: no titles, no `anyOf [T, null]`, no output schema (the answer still carries its JSON)
            assert tool.output_schema is None, name
            assert '"title"' not in json.dumps(tool.input_schema) and '"null"' not in json.dumps(tool.input_schema)
            assert "\n" not in tool.description and len(tool.description) <= 400, name

        categories = list(CATEGORIES)
        remember_props = tools["remember"].input_schema["properties"]
        assert remember_props["category"]["enum"] == categories
        assert remember_props["scope"]["enum"] == ["global", "project"]
        assert "scope" not in tools["remember"].input_schema["required"]
        assert remember_props["wait"]["default"] is False
        assert "global: preference" in remember_props["category"]["description"]
        recall_props = tools["recall_memories"].input_schema["properties"]
        assert recall_props["categories"]["items"]["enum"] == categories
        assert recall_props["limit"]["maximum"] == 100
        assert recall_props["detail"]["default"] == "compact"
        list_props = tools["list_memories"].input_schema["properties"]
        assert list_props["category"]["enum"] == categories
        assert tools["delete_memories"].input_schema["properties"]["category"]["enum"] == categories
        assert "letters, digits" in tools["remember"].input_schema["properties"]["user_id"]["description"]
        assert tools["recall_memories"].annotations is not None and tools["recall_memories"].annotations.read_only_hint
        delete_hints = tools["delete_memories"].annotations
        assert delete_hints is not None and delete_hints.destructive_hint


@pytest.mark.parametrize(("toolsets", "extra"), [("", ()), ("graph", ("get_facts_about", "query_graph")),
                                                 ("runs,memory", ("start_task", "update_memory"))])
async def test_the_default_toolset_is_small_and_others_come_by_name(api: str, toolsets: str, extra: tuple[str, ...]
                                                                    ) -> None:
    """The eight tools every agent gets answer `tools/list` in at most 10 KB; MCP_TOOLSETS adds the others."""
    core = {"recall_memories", "remember", "remember_conversation", "get_project_context", "search_knowledge_graph",
            "list_memories", "delete_memories", "get_task_status"}
    async with connect("stdio", api, toolsets) as client:
        listed = await client.list_tools()
    names = {t.name for t in listed.tools}
    assert core <= names and set(extra) <= names
    if not toolsets:
        assert names == core
        size = len(listed.model_dump_json(by_alias=True, exclude_none=True))
        assert size <= 10_000, size


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_remember_with_wait_then_recall(api: str, transport: str) -> None:
    user = unique(f"mcp-{transport}")
    async with connect(transport, api) as client:
        out = await call(client, "remember", content="I prefer tabs over spaces", user_id=user,
                         category="preference", agent_id="claude-code", wait=True)
        assert out["status"] == "completed" and out["error"] is None
        [memory] = out["result"]["memories"]
        assert memory["content"] == "I prefer tabs over spaces"
        assert memory["scope"] == "global" and memory["category"] == "preference"

        found = await call(client, "recall_memories", query="tabs or spaces", user_id=user)
        assert found["results"][0]["id"] == memory["id"]
        assert "source" not in found["results"][0]  # found by meaning or words: said only for the graph
        only = await call(client, "recall_memories", query="tabs", user_id=user, categories=["decision"])
        assert all(r["source"] == "graph" for r in only["results"])

        # without wait: the task id at once, then the same status through get_task_status
        queued = await call(client, "remember", content="We chose Redis for caching", user_id=user,
                            category="decision", project_id="shop")
        assert queued["status"] == "accepted" and queued["task_id"]
        done = await _until_done(client, queued["task_id"])
        assert done["result"]["memories"][0]["scope"] == "project"


RECALLED = [
    "I prefer tabs over spaces in every language",
    "I review pull requests in the morning before standup",
    "My laptop runs Fedora with the GNOME desktop",
    "I use Neovim with the LazyVim distribution for editing",
    "I write commit messages in the imperative mood",
]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_recall_is_compact_by_default_and_full_on_request(api: str, transport: str) -> None:
    """An agent pays for every token of the answer: by default each memory is its content, id, category, date
    and source; scores, signals and metadata come with detail="full"."""
    user = unique(f"mcp-lean-{transport}")
    async with connect(transport, api) as client:
        out = await call(client, "remember_many", user_id=user, wait=True,
                         facts=[{"content": c, "category": "preference"} for c in RECALLED])
        assert out["status"] == "completed", out
        compact = await client.call_tool("recall_memories", {"query": "how I work", "user_id": user, "limit": 5})
        full = await client.call_tool("recall_memories", {"query": "how I work", "user_id": user, "limit": 5,
                                                          "detail": "full"})
        assert not compact.is_error and not full.is_error
        rows = compact.structured_content["results"] if compact.structured_content else []
        assert sorted(r["content"] for r in rows) == sorted(RECALLED)
        today = time.strftime("%Y-%m-%d", time.gmtime())
        for row in rows:
            assert set(row) == {"id", "content", "category", "date"}, row
            assert (row["category"], row["date"]) == ("preference", today)
        assert json.loads(text(compact)) == compact.structured_content
        content = sum(len(c) for c in RECALLED)  # 239 characters of memory
        # the text an agent reads: an id, a category, a date and a source around each content (about 125 characters)
        assert len(text(compact)) < content + 5 * 130, text(compact)
        detailed = full.structured_content["results"] if full.structured_content else []
        assert {"score", "signals", "metadata", "scope", "date"} <= set(detailed[0])
        assert len(text(full)) > 4 * len(text(compact)), (len(text(full)), len(text(compact)))


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_update_memory_corrects_a_memory(api: str, transport: str) -> None:
    """An agent corrects a memory over MCP; the stdio server sends it through the typed client."""
    user = unique(f"mcp-upd-{transport}")
    async with connect(transport, api) as client:
        memory_id = await remember(client, content="I live in Porto", user_id=user, category="personal_fact")
        out = await call(client, "update_memory", memory_id=memory_id, content="I live in Lisbon", user_id=user,
                         wait=True)
        assert out["status"] == "completed", out
        listed = await call(client, "list_memories", user_id=user)
        assert [(m["id"], m["content"]) for m in listed["memories"]] == [(memory_id, "I live in Lisbon")]
        missing = await fails(client, "update_memory", memory_id="0123456789abcdef", content="x", user_id=user)
        assert "unknown memory id" in missing


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_remember_many_stores_the_facts_as_one_task_in_order(api: str, transport: str) -> None:
    user = unique(f"mcp-many-{transport}")
    async with connect(transport, api) as client:
        out = await call(client, "remember_many", user_id=user, project_id="shop", agent_id="claude-code", wait=True,
                         facts=[{"content": "Prefers tabs over spaces", "category": "preference"},
                                {"content": "The shop uses PostgreSQL 16", "category": "tech_stack"}])
        assert out["status"] == "completed" and out["error"] is None
        first, second = out["result"]["memories"]
        assert (first["content"], first["scope"]) == ("Prefers tabs over spaces", "global")
        assert (second["scope"], second["project_id"]) == ("project", "shop")
        found = await call(client, "recall_memories", query="PostgreSQL", user_id=user, project_id="shop")
        assert found["results"][0]["id"] == second["id"]
        bad = await client.call_tool("remember_many", {"user_id": user, "facts": [
            {"content": "Prefers tabs", "category": "preference"}, {"content": "  ", "category": "preference"}]})
        assert bad.is_error and "memories[1]: content is empty" in str(bad.content)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_duplicate_review_merge_and_traced_recall(api: str, transport: str) -> None:
    user = unique(f"mcp-dup-{transport}")
    async with connect(transport, api) as client:
        first = await remember(client, content="I work with Jon Smith on the React app.", user_id=user,
                               category="personal_fact")
        second = await remember(client, content="I work with Jon on the billing app.", user_id=user,
                                category="personal_fact")
        page = await call(client, "list_duplicate_entities", user_id=user)
        [pair] = page["items"]
        assert (pair["source"]["name"], pair["target"]["name"]) == ("Jon", "Jon Smith")
        assert pair["match_type"] == "contained_words" and "fuzzy=" in pair["reason"]
        assert "same" in await fails(client, "merge_entities", user_id=user, source_id=pair["source"]["id"],
                                     target_id=pair["source"]["id"])
        done = await call(client, "review_duplicate", user_id=user, source_id=pair["source"]["id"],
                          target_id=pair["target"]["id"], confirm=True)
        assert done["status"] == "confirmed" and done["merged_into"] == pair["target"]["id"]
        assert (await call(client, "list_duplicate_entities", user_id=user))["items"] == []
        again = await call(client, "merge_entities", user_id=user, source_id=pair["source"]["id"],
                           target_id=pair["target"]["id"])  # idempotent
        assert again["status"] == "merged"

        # two people of one name, told apart by what the memories say they are (docs/identity.md, Meanings)
        await remember(client, content="I work with John Smith, the plumber, on the boiler.", user_id=user,
                       category="personal_fact")
        await remember(client, content="I work with John Smith, our VP of Sales, on the forecast.", user_id=user,
                       category="personal_fact")
        pairs = (await call(client, "list_duplicate_entities", user_id=user))["items"]
        [homonyms] = [p for p in pairs if p["source"]["name"] == p["target"]["name"] == "John Smith"]
        assert homonyms["match_type"] == "other_role"
        assert sorted([homonyms["source"]["roles"], homonyms["target"]["roles"]]) == [["plumber"], ["vp of sales"]]

        found = await call(client, "recall_memories", query="Jon Smith", user_id=user, trace=True)
        assert {first, second} <= {r["id"] for r in found["results"]}
        assert found["trace_id"]
        plain = await call(client, "recall_memories", query="Jon Smith", user_id=user)
        assert plain.get("trace_id") is None


async def _until_done(client: Client, task_id: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        status = await call(client, "get_task_status", task_id=task_id)
        seen.append(status["status"])
        if status["status"] == "completed":
            return status
        assert status["status"] in ("queued", "processing"), status
        await asyncio.sleep(0.1)
    raise AssertionError(f"task {task_id} not completed after {timeout}s: {seen}")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_remember_conversation_then_task_status(api: str, transport: str) -> None:
    user = unique(f"mcp-conv-{transport}")
    messages = [
        {"role": "user", "content": "I prefer dark mode in every editor. I work at Acme Corp."},
        {"role": "assistant", "content": "Noted. You probably like Java too?"},
        {"role": "user", "content": "In this project we use FastAPI and PostgreSQL."},
    ]
    async with connect(transport, api) as client:
        queued = await call(client, "remember_conversation", messages=messages, user_id=user, project_id="shop-api")
        assert queued["status"] == "accepted"
        done = await _until_done(client, queued["task_id"])
        memories = done["result"]["memories"]
        assert memories and done["result"]["extractor"] == "offline"
        # the assistant's guess is no fact; it is kept only as what the assistant said, in the window of
        # messages 0-1; message 2 alone is the text of its fact, so its window is not stored twice
        assert all("Java" not in m["content"] for m in memories if m["category"] != "interaction")
        windows = [m for m in memories if m["category"] == "interaction"]
        assert [m["source_message_ids"] for m in windows] == [["0", "1"]]
        assert windows[0]["content"] == ("user: I prefer dark mode in every editor. I work at Acme Corp.\n"
                                         "assistant: Noted. You probably like Java too?")
        assert [m["source_message_ids"] for m in memories if m["category"] == "tech_stack"] == [["2"]]
        assert any(m["scope"] == "project" and m["project_id"] == "shop-api" for m in memories)

        found = await call(client, "recall_memories", query="dark mode editor", user_id=user, project_id="shop-api")
        assert any("dark mode" in r["content"] for r in found["results"])
        # collapse by source: the dark-mode fact is folded into the window of messages 0-1, which keeps the slot
        fact = next(m["id"] for m in memories if m["category"] != "interaction" and "dark mode" in m["content"])
        slot = next(r for r in found["results"] if r["id"] == windows[0]["id"])
        assert {"id": fact, "kind": "fact"} in slot["also"] and fact not in [r["id"] for r in found["results"]]
        flat = await call(client, "recall_memories", query="dark mode editor", user_id=user, project_id="shop-api",
                          collapse=False)
        assert {fact, windows[0]["id"]} <= {r["id"] for r in flat["results"]}


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_project_context(api: str, transport: str) -> None:
    user = unique(f"mcp-ctx-{transport}")
    async with connect(transport, api) as client:
        await remember(client, content="Prefers tabs", user_id=user, category="preference")
        await remember(client, content="Uses FastAPI", user_id=user, category="tech_stack", project_id="app")
        await remember(client, content="Uses Rails", user_id=user, category="tech_stack", project_id="other")

        result = await client.call_tool("get_project_context", {"user_id": user, "project_id": "app"})
        assert not result.is_error, text(result)
        markdown = text(result)
        assert markdown.startswith("# Memory context (project app)")
        assert "## Preference\n- Prefers tabs" in markdown and "- Uses FastAPI [app]" in markdown
        assert "Rails" not in markdown
        ctx = result.structured_content
        assert isinstance(ctx, dict)
        assert [g["category"] for g in ctx["categories"]] == ["preference", "tech_stack"]
        assert ctx["total"] == 2 and ctx["project_id"] == "app"

        glob = await call(client, "get_project_context", user_id=user)
        assert [g["category"] for g in glob["categories"]] == ["preference"]
        short = await client.call_tool("get_project_context", {"user_id": user, "project_id": "app", "max_chars": 200})
        assert len(text(short)) <= 200
        budget = await client.call_tool("get_project_context", {"user_id": user, "project_id": "app", "max_tokens": 50})
        ctx = budget.structured_content
        assert isinstance(ctx, dict) and 0 < ctx["tokens"] <= 50 and ctx["omitted"] == 0
        assert ctx["order"][0] != ctx["order"][-1] and "- Uses FastAPI [app]" in text(budget)
        # the project's memory first
        assert [m["content"] for g in ctx["categories"] for m in g["memories"] if m["id"] == ctx["order"][0]] == [
            "Uses FastAPI"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_record_a_task_then_recall_it(api: str, transport: str) -> None:
    user = unique(f"mcp-run-{transport}")
    async with connect(transport, api) as client:
        started = await call(client, "start_task", task="Run the integration tests", user_id=user,
                             project_id="api", session_id="s1")
        run_id = started["run_id"]
        assert started["status"] == "accepted" and started["task_id"]
        step = await call(client, "record_task_step", run_id=run_id, user_id=user, seq=1, action="run the tests again",
                          tool_calls=[{"tool": "Bash", "arguments": {"command": "make test"}, "result": "42 passed"}],
                          wait=True)
        assert step["status"] == "completed", step
        step = await call(client, "record_task_step", run_id=run_id, user_id=user, seq=0, action="run the tests",
                          tool_calls=[{"tool": "Bash", "arguments": {"command": "make test",
                                                                     "env": "PGPASSWORD=hunter2-secret-pw"},
                                       "status": "error", "error": "psql: could not connect: Connection refused",
                                       "error_kind": "db_down"}], wait=True)
        assert step["status"] == "completed", step
        done = await call(client, "finish_task", run_id=run_id, user_id=user, success=True,
                          summary="Postgres was not running; docker compose up -d db fixed it", wait=True)
        assert done["status"] == "completed", done

        found = (await call(client, "recall_similar_tasks", query="make test connection refused", user_id=user))
        [hit] = found["results"]
        assert hit["run_id"] == run_id and hit["outcome"] == "success" and hit["failed_tool_calls"] == 1
        assert hit["summary"] == "Postgres was not running; docker compose up -d db fixed it"
        assert [c["error_kind"] for c in hit["matched_tool_calls"]][:1] == ["db_down"]
        assert "hunter2" not in json.dumps(found)
        assert (await call(client, "recall_similar_tasks", query="make test", user_id=user,
                           outcome="failure"))["results"] == []
        assert (await call(client, "recall_similar_tasks", query="make test",
                           user_id=unique("nobody")))["results"] == []
        unknown = await fails(client, "finish_task", run_id="never-started", user_id=user, success=False)
        assert "unknown run id" in unknown


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_search_knowledge_graph(api: str, transport: str) -> None:
    user = unique(f"mcp-graph-{transport}")
    async with connect(transport, api) as client:
        await remember(client, content="I work at Acme Corp", user_id=user, category="personal_fact")
        mid = await remember(client, content="We use FastAPI and Redis", user_id=user, category="tech_stack",
                             project_id="shop")

        facts = (await call(client, "search_knowledge_graph", query="work", user_id=user))["results"]
        acme = next(f for f in facts if f["target"] == "Acme Corp")
        assert acme["source"] == "user" and acme["predicate"] == "works_at" and acme["invalid_at"] is None

        shop = (await call(client, "search_knowledge_graph", query="Redis", user_id=user, project_id="shop"))
        redis_fact = next(f for f in shop["results"] if f["target"] == "Redis")
        assert redis_fact["project_id"] == "shop" and mid in redis_fact["memory_ids"]
        other = await call(client, "search_knowledge_graph", query="Redis", user_id=unique("nobody"))
        assert other["results"] == []


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_list_and_delete(api: str, transport: str) -> None:
    user = unique(f"mcp-del-{transport}")
    async with connect(transport, api) as client:
        keep = await remember(client, content="Prefers vim", user_id=user, category="preference")
        notes = [await remember(client, content=f"task note {i}", user_id=user, category="task_context")
                 for i in range(3)]

        page = await call(client, "list_memories", user_id=user)
        assert [m["id"] for m in page["memories"]] == [*notes[::-1], keep] and page["next_cursor"] is None
        first = await call(client, "list_memories", user_id=user, category="task_context", limit=2)
        rest = await call(client, "list_memories", user_id=user, category="task_context", limit=2,
                          cursor=first["next_cursor"])
        assert [m["id"] for m in first["memories"] + rest["memories"]] == notes[::-1]  # newest first
        oldest = await call(client, "list_memories", user_id=user, order="oldest")
        assert [m["id"] for m in oldest["memories"]] == [keep, *notes]

        by_id = await call(client, "delete_memories", user_id=user, memory_ids=[notes[0]], wait=True)
        assert by_id["status"] == "completed" and by_id["result"]["deleted"] == [notes[0]]
        queued = await call(client, "delete_memories", user_id=user, category="task_context")
        assert queued["status"] == "accepted"
        done = await _until_done(client, queued["task_id"])
        assert sorted(done["result"]["deleted"]) == sorted(notes[1:])

        left = await call(client, "list_memories", user_id=user)
        assert [m["id"] for m in left["memories"]] == [keep]
        found = await call(client, "recall_memories", query="task note", user_id=user)
        assert all(r["id"] not in notes for r in found["results"])

        assert "all=true" in await fails(client, "delete_memories", user_id=user)
        assert "not both" in await fails(client, "delete_memories", user_id=user, memory_ids=[keep],
                                         category="preference")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_bad_arguments_are_tool_errors(api: str, transport: str) -> None:
    user = unique(f"mcp-bad-{transport}")
    async with connect(transport, api) as client:
        msg = await fails(client, "remember", content="x", user_id=user, category="favourite_color")
        assert "Invalid category 'favourite_color'" in msg and "preference" in msg
        msg = await fails(client, "recall_memories", query="x", user_id=user, categories=["nope"])
        assert "Invalid category 'nope'" in msg
        msg = await fails(client, "list_memories", user_id=user, category="nope")
        assert "Invalid category 'nope'" in msg

        msg = await fails(client, "remember", content="x", category="preference")
        assert "user_id" in msg and "required" in msg.lower()
        msg = await fails(client, "recall_memories", query="x")
        assert "user_id" in msg and "required" in msg.lower()
        msg = await fails(client, "remember", content="x", user_id="no spaces allowed", category="preference")
        assert "user_id" in msg and "letters, digits" in msg and "[A-Za-z" not in msg

        msg = await fails(client, "remember", content="Uses Go", user_id=user, category="tech_stack")
        assert "needs a project_id" in msg
        msg = await fails(client, "remember", content="Chose Go", user_id=user, category="decision", scope="project")
        assert "needs a project_id" in msg
        msg = await fails(client, "remember", content="   ", user_id=user, category="preference")
        assert "content is empty" in msg
        msg = await fails(client, "remember_conversation", messages=[{"role": "assistant", "content": "hi"}],
                          user_id=user)
        assert "no non-empty 'user' message" in msg
        msg = await fails(client, "get_task_status", task_id="0123456789abcdef")
        assert "unknown task id" in msg

        # the server is still there and answers normal calls
        mid = await remember(client, content="Still working", user_id=user, category="preference")
        found = await call(client, "recall_memories", query="still working", user_id=user)
        assert found["results"][0]["id"] == mid
        assert not (await client.call_tool("list_memories", {"user_id": user})).is_error


async def test_stdio_without_api_answers_with_a_tool_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    async with connect("stdio", url) as client:
        assert len((await client.list_tools()).tools) == len(TOOLS)
        msg = await fails(client, "recall_memories", query="x", user_id="someone")
        assert f"memory API at {url} is not reachable" in msg and "MEMORY_API_URL" in msg


def test_stdio_server_writes_only_protocol_to_stdout(api: str, tmp_path: Path) -> None:
    """`claude mcp add` runs the command in the user's project, stdout being the protocol channel: logs
    go to stderr, and the project's own `.env` (not ours) is ignored."""
    import subprocess

    (tmp_path / ".env").write_text("PORT=1\nEMBEDDER=not-an-embedder\nENVIRONMENT=staging\n")

    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "0"}}}
    env = {**os.environ, "MEMORY_API_URL": api, "LOG_LEVEL": "DEBUG"}
    proc = subprocess.run(
        [sys.executable, "-m", "service.mcp"], input=json.dumps(init) + "\n", capture_output=True, text=True,
        cwd=tmp_path, env=env, timeout=60,
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines, proc.stderr
    for line in lines:
        assert json.loads(line)["jsonrpc"] == "2.0", line
    assert json.loads(lines[0])["result"]["serverInfo"]["name"] == "memory-platform"
    assert "mcp_stdio_started" in proc.stderr


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_list_memories_shows_superseded_preferences_only_when_asked(api: str, transport: str) -> None:
    """Preferences with a history (docs/preferences.md): the second budget supersedes the first (same kind)."""
    user = unique(f"mcp-pref-{transport}")
    async with connect(transport, api) as client:
        old = await remember(client, content="Team dinner budget is 50 dollars", user_id=user, category="preference",
                             kind="budget")
        new = await remember(client, content="Team dinner budget is 80 dollars", user_id=user, category="preference",
                             kind="budget")
        active = await call(client, "list_memories", user_id=user)
        assert [m["id"] for m in active["memories"]] == [new]
        history = await call(client, "list_memories", user_id=user, include_superseded=True)
        by_id = {m["id"]: m for m in history["memories"]}
        assert set(by_id) == {old, new} and by_id[old]["superseded_by"] == new
        # an explicit kind and applies_to: another scope, so the active budget above stays
        vim = await remember(client, content="Use 4-space indentation", user_id=user, category="preference",
                             kind="indentation", applies_to=["Python"])
        active = await call(client, "list_memories", user_id=user)
        assert {m["id"]: (m["kind"], m["applies_to"]) for m in active["memories"]} == {
            new: ("budget", []), vim: ("indentation", ["Python"])}
