"""The graph-as-API MCP tools through the official MCP client, over both transports, against the real
stack: an entity, a relationship and a fact told to the graph, then the facts about an entity and a structural
query."""

from __future__ import annotations

import pytest

from tests.conftest import unique
from tests.integration.test_mcp import TRANSPORTS, api, call, connect

__all__ = ["api"]  # the module's service (test_mcp.py's fixture)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_tell_the_graph_then_ask_it(api: str, transport: str) -> None:
    user = unique(f"mcp-kg-{transport}")
    async with connect(transport, api) as client:
        entity = await call(client, "add_entity", user_id=user, name="Acme", type="company", wait=True,
                            aliases=["Acme Inc"], description="Makes anvils.")
        assert entity["status"] == "completed", entity
        resolution = entity["result"]["resolution"]
        assert resolution["decision"] == "created"
        rel = await call(client, "add_relationship", user_id=user, source="Alice", source_type="person",
                         predicate="works for", target="Acme Inc", confidence=0.9, valid_at="2021-01-01",
                         wait=True)
        assert rel["status"] == "completed", rel
        assert rel["result"]["target"]["entity_id"] == resolution["entity_id"]  # found by its alias
        fact = await call(client, "add_fact", user_id=user, subject="Atlas", subject_type="project",
                          predicate="uses", object="knowledge graphs", object_type="concept", wait=True)
        assert fact["status"] == "completed", fact

        about = await call(client, "get_facts_about", user_id=user, name="Acme")
        assert about["entity"]["description"] == "Makes anvils."
        assert [(f["subject"]["name"], f["predicate"], f["confidence"]) for f in about["items"]] == [
            ("Alice", "works_at", 0.9)]
        found = await call(client, "query_graph", user_id=user, subject_type="project", predicate="uses",
                           object="knowledge graphs")
        assert [(f["subject"]["name"], f["object"]["name"]) for f in found["items"]] == [
            ("Atlas", "knowledge graphs")]
        before = await call(client, "query_graph", user_id=user, predicate="works_at", as_of="2020-06-01")
        assert before["items"] == []
