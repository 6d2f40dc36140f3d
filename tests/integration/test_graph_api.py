"""The graph as an API through the whole app: structured writes through the resolution gate with their
decisions, idempotent retries, facts about an entity across a merge and a supersession, structural queries,
erasure, and the entities every write task reports."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from tests.conftest import unique
from tests.integration.conftest import wait_task, write_raw


async def accepted(client: httpx.AsyncClient, path: str, body: dict[str, Any], key: str | None = None) -> str:
    headers = {"Idempotency-Key": key} if key else {}
    resp = await client.post(path, json=body, headers=headers)
    assert resp.status_code == 202, resp.text
    return str(resp.json()["task_id"])


async def done(client: httpx.AsyncClient, path: str, body: dict[str, Any], key: str | None = None
               ) -> dict[str, Any]:
    task = await wait_task(client, await accepted(client, path, body, key))
    assert task["status"] == "completed", task
    result: dict[str, Any] = task["result"]
    assert result["graph"] == "stored"
    return result


async def facts(client: httpx.AsyncClient, user: str, **params: Any) -> dict[str, Any]:
    resp = await client.get("/v1/graph/facts", params={"user_id": user, **params})
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


async def query(client: httpx.AsyncClient, user: str, **body: Any) -> dict[str, Any]:
    resp = await client.post("/v1/graph/query", json={"user_id": user, **body})
    assert resp.status_code == 200, resp.text
    page: dict[str, Any] = resp.json()
    return page


def triples(page: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(f["subject"]["name"], f["predicate"], f["object"]["name"]) for f in page["items"]]


async def test_entity_writes_carry_the_gate_decision_and_retries_are_one_task(client: httpx.AsyncClient) -> None:
    u = unique("gent")
    body = {"user_id": u, "name": "Acme Corp", "type": "company", "aliases": ["Acme"],
            "description": "Makes anvils.", "attributes": {"founded": 1949}}
    key = unique("idem")
    first = await accepted(client, "/v1/graph/entities", body, key)
    assert await accepted(client, "/v1/graph/entities", body, key) == first  # the retry names the same task
    again = await client.post("/v1/graph/entities", json={**body, "name": "Other"}, headers={"Idempotency-Key": key})
    assert again.status_code == 422  # the key with another request
    task = await wait_task(client, first)
    created = task["result"]["resolution"]
    assert created["decision"] == "created" and created["matched_id"] is None
    acme = created["entity_id"]
    assert task["result"]["entity_count"] == 1 and task["result"]["relation_count"] == 0

    # the same name again: the graph holds it
    same = (await done(client, "/v1/graph/entities", {"user_id": u, "name": "acme corp", "type": "organization"}
                       ))["resolution"]
    assert (same["decision"], same["entity_id"]) == ("existing", acme)
    # an alias's spelling as a new entity: the gate merges it into the entity (exact key of an alias)
    merged = (await done(client, "/v1/graph/entities", {"user_id": u, "name": "ACME", "type": "organization"}
                         ))["resolution"]
    assert (merged["decision"], merged["entity_id"], merged["matched_id"]) == ("merged", acme, acme)
    assert merged["score"] == 1.0
    # a person of a close name is not the company
    person = (await done(client, "/v1/graph/entities", {"user_id": u, "name": "Acme Corp", "type": "person"}
                         ))["resolution"]
    assert person["decision"] == "created" and person["entity_id"] != acme

    nodes = {n["id"]: n for n in (await client.get("/v1/graph/nodes", params={"user_id": u})).json()["items"]}
    assert nodes[acme]["type"] == "organization" and "Acme" in nodes[acme]["aliases"]
    page = await facts(client, u, name="Acme")  # by alias
    assert page["entity"]["id"] == acme and page["entity"]["description"] == "Makes anvils."
    assert page["entity"]["attributes"] == {"founded": 1949} and page["items"] == []
    for params in ({"name": "Acme"}, {"entity_id": acme}):  # another tenant's graph
        other = await client.get("/v1/graph/facts", params={"user_id": unique("other"), **params})
        assert other.status_code == 404, other.text
    other = await client.get(f"/v1/graph/entities/{acme}/facts", params={"user_id": unique("other")})
    assert other.status_code == 404
    neither = await client.get("/v1/graph/facts", params={"user_id": u})
    assert neither.status_code == 400


async def test_relations_and_facts_supersede_read_back_and_erase(client: httpx.AsyncClient) -> None:
    u = unique("gfact")
    acme = (await done(client, "/v1/graph/entities", {"user_id": u, "name": "Acme", "type": "organization"}
                       ))["resolution"]["entity_id"]
    rel = await done(client, "/v1/graph/relations", {
        "user_id": u, "source": {"name": "Alice Smith", "type": "person"}, "target": {"id": acme},
        "predicate": "works for", "confidence": 0.8, "valid_at": "2020-01-01"})
    assert rel["predicate"] == "works_at" and rel["relation_count"] == 1 and rel["entity_count"] == 2
    assert rel["source"]["decision"] == "created" and rel["target"] == {
        "decision": "existing", "entity_id": acme, "matched_id": None, "score": None, "match_type": None}
    alice = rel["source"]["entity_id"]
    missing = await client.post("/v1/graph/relations", json={"user_id": u, "source": "Alice Smith",
                                                               "target": {"id": unique("nope")}, "predicate": "knows"})
    assert missing.status_code == 404

    # a newer value of a single-valued predicate supersedes the older one
    later = await done(client, "/v1/graph/facts", {
        "user_id": u, "subject": "Alice Smith", "predicate": "works_at",
        "object": {"name": "Globex", "type": "organization"}, "valid_at": "2024-06-01"})
    assert later["source"]["entity_id"] == alice and later["source"]["decision"] == "existing"
    page = await facts(client, u, name="alice smith")
    assert [(f["object"]["name"], f["current"]) for f in page["items"]] == [("Globex", True), ("Acme", False)]
    old = page["items"][1]
    assert old["invalid_at"].startswith("2024-06-01") and old["valid_at"].startswith("2020-01-01")
    assert old["confidence"] == 0.8 and old["fact"] == "Alice Smith works for Acme"
    current_only = await facts(client, u, name="Alice Smith", include_history="false")
    assert [f["object"]["name"] for f in current_only["items"]] == ["Globex"]
    # both directions: the company's page lists the fact about Alice
    by_id = await client.get(f"/v1/graph/entities/{acme}/facts", params={"user_id": u})
    assert by_id.status_code == 200, by_id.text
    assert [(f["subject"]["id"], f["predicate"], f["current"]) for f in by_id.json()["items"]] == [
        (alice, "works_at", False)]

    # as_of: who worked where then
    then = await query(client, u, predicate="works at", as_of="2022-01-01T00:00:00Z")
    assert triples(then) == [("Alice Smith", "works_at", "Acme")]
    assert triples(await query(client, u, predicate="employed by", object="Globex")) == [
        ("Alice Smith", "works_at", "Globex")]

    # erasure: deleting the memory that states the Globex fact removes it (and the entity only it named)
    memory_id = later["memories"][0]["id"]
    deleted = await client.delete(f"/v1/memories/{memory_id}", params={"user_id": u})
    assert deleted.status_code == 202, deleted.text
    assert (await wait_task(client, deleted.json()["task_id"]))["status"] == "completed"
    page = await facts(client, u, name="Alice Smith")
    assert [f["object"]["name"] for f in page["items"]] == ["Acme"]
    assert (await client.get("/v1/graph/facts", params={"user_id": u, "name": "Globex"})).status_code == 404


async def test_facts_about_an_entity_across_a_merge(client: httpx.AsyncClient) -> None:
    u = unique("gmerge")
    a = await done(client, "/v1/graph/facts", {"user_id": u, "subject": {"name": "Robert Jones", "type": "person"},
                                               "predicate": "lives in", "object": {"name": "Lyon", "type": "place"}})
    b = await done(client, "/v1/graph/facts", {"user_id": u, "subject": {"name": "Bobby J", "type": "person"},
                                               "predicate": "uses", "object": {"name": "Vim", "type": "editor"}})
    robert, bobby = a["source"]["entity_id"], b["source"]["entity_id"]
    assert robert != bobby
    merged = await client.post("/v1/graph/entities/merge", json={"user_id": u, "source_id": bobby, "target_id": robert})
    assert merged.status_code == 200, merged.text
    for params in ({"name": "Bobby J"}, {"name": "Robert Jones"}):
        page = await facts(client, u, **params)
        assert page["entity"]["id"] == robert
        assert sorted(triples(page)) == [("Robert Jones", "lives_in", "Lyon"), ("Robert Jones", "uses", "Vim")]
    by_old_id = await client.get(f"/v1/graph/entities/{bobby}/facts", params={"user_id": u})
    assert by_old_id.json()["entity"]["id"] == robert
    # a relation to the merged entity's id lands on its target
    rel = await done(client, "/v1/graph/relations", {"user_id": u, "source": {"id": bobby}, "target": "Lyon",
                                                     "predicate": "visited"})
    assert rel["source"]["entity_id"] == robert


async def test_structural_queries_on_facts_written_through_the_api(client: httpx.AsyncClient) -> None:
    u = unique("gq")
    for subject, stype, predicate, obj, otype in (
        ("Atlas", "project", "uses", "knowledge graphs", "concept"),
        ("Hermes", "project", "built with", "Knowledge Graphs", "concept"),
        ("Zeus", "project", "uses", "PostgreSQL", "database"),
        ("Dana", "person", "uses", "knowledge graphs", "concept"),
        ("Dana", "person", "works at", "Initech", "company"),
        ("user", "person", "decided", "Hermes", "project"),
    ):
        await done(client, "/v1/graph/facts", {"user_id": u, "subject": {"name": subject, "type": stype},
                                               "predicate": predicate, "object": {"name": obj, "type": otype}})
    # which projects use knowledge graphs?
    page = await query(client, u, subject_type="project", predicate="uses", object="knowledge graphs")
    assert sorted(s for s, _, _ in triples(page)) == ["Atlas", "Hermes"]
    # who works at Initech? (object type through its synonym)
    assert triples(await query(client, u, predicate="works_at", object_type="organisation")) == [
        ("Dana", "works_at", "Initech")]
    # what did I decide about Hermes?
    assert triples(await query(client, u, subject="user", object="Hermes")) == [("user", "decided", "Hermes")]
    # what uses a database?
    assert triples(await query(client, u, object_type="database")) == [("Zeus", "uses", "PostgreSQL")]
    # an unknown name matches nothing; paging walks every fact once
    assert (await query(client, u, object="Nothing Such"))["items"] == []
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        page = await query(client, u, limit=2, **({"cursor": cursor} if cursor else {}))
        seen += [f["id"] for f in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 6


async def test_every_write_task_lists_the_entities_it_touched(client: httpx.AsyncClient) -> None:
    u = unique("grep")
    first = (await write_raw(client, user_id=u, content="I work at Initech and I use PostgreSQL.",
                             category="personal_fact"))["result"]
    names = {e["name"]: e for e in first["entities"]}
    assert {"Initech", "PostgreSQL"} <= set(names) and first["relation_count"] >= 2
    assert all(e["decision"] in ("created", "existing") for e in first["entities"])
    assert first["entity_count"] == len({e["entity_id"] for e in first["entities"]})
    second = (await write_raw(client, user_id=u, content="I use PostgreSQL for every project.",
                              category="technical_skill"))["result"]
    again = {e["name"]: e for e in second["entities"]}
    assert again["PostgreSQL"]["decision"] == "existing"
    assert again["PostgreSQL"]["entity_id"] == names["PostgreSQL"]["entity_id"]
    assert "Initech" not in again


async def test_communities_of_a_graph_with_two_clusters(client: httpx.AsyncClient) -> None:
    u = unique("gcom")
    clusters = (["Alice", "Bob", "Carol", "Acme"], ["Xavier", "Yan", "Zoe", "Globex"])
    for members in clusters:  # every pair of a cluster related: two dense groups
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                await done(client, "/v1/graph/facts", {"user_id": u, "subject": a, "predicate": "knows",
                                                       "object": b})
    # one weak bridge between them
    await done(client, "/v1/graph/facts", {"user_id": u, "subject": "Carol", "predicate": "met", "object": "Yan"})
    assert (await client.get("/v1/graph/communities", params={"user_id": u})).json() == {
        "items": [], "next_cursor": None}  # nothing grouped before a run
    resp = await client.post("/v1/graph/communities/rebuild", json={"user_id": u})
    assert resp.status_code == 202, resp.text
    task = await wait_task(client, resp.json()["task_id"])
    assert task["status"] == "completed", task
    assert task["result"]["report"] == {"communities": 2, "entities": 8, "relations": 13, "summarised": 0}
    page = (await client.get("/v1/graph/communities", params={"user_id": u})).json()
    groups = sorted(sorted(m["name"] for m in c["members"]) for c in page["items"])
    assert groups == sorted(sorted(c) for c in clusters)
    for c in page["items"]:
        assert c["size"] == 4 and c["predicates"][0] == "knows" and c["summary_source"] == "offline"
        assert c["summary"].startswith(", ".join(m["name"] for m in c["members"][:4]))
        assert c["members"][0]["name"] in ("Carol", "Yan")  # the bridge's ends are the best connected
    # graph search returns the community of the entity the query names
    found = await client.post("/v1/graph/search", json={"user_id": u, "query": "Zoe"})
    assert found.status_code == 200, found.text
    assert [sorted(m["name"] for m in c["members"]) for c in found.json()["communities"]] == [sorted(clusters[1])]
    first = await client.get("/v1/graph/communities", params={"user_id": u, "limit": 1})
    assert len(first.json()["items"]) == 1 and first.json()["next_cursor"] == "1"
    # a rebuild of the same graph gives the same communities (ids too)
    again = await client.post("/v1/graph/communities/rebuild", json={"user_id": u})
    assert (await wait_task(client, again.json()["task_id"]))["status"] == "completed"
    assert [c["id"] for c in (await client.get("/v1/graph/communities", params={"user_id": u})).json()["items"]] \
        == [c["id"] for c in page["items"]]


async def test_export_and_import_keep_what_structured_writes_said(client: httpx.AsyncClient) -> None:
    u = unique("gport")
    await done(client, "/v1/graph/entities", {"user_id": u, "name": "Acme", "type": "organization",
                                              "attributes": {"tier": "gold"}, "description": "A client."})
    await done(client, "/v1/graph/relations", {"user_id": u, "source": {"name": "Alice", "type": "person"},
                                               "target": "Acme", "predicate": "works at", "confidence": 0.7})
    resp = await client.get("/v1/export", params={"user_id": u})
    assert resp.status_code == 200, resp.text
    lines = [json.loads(line) for line in resp.text.splitlines()]
    [fact] = [x["fact"] for x in lines if x["type"] == "fact"]
    assert fact["confidence"] == 0.7 and fact["predicate"] == "works_at"
    acme = next(x["entity"] for x in lines if x["type"] == "entity" and x["entity"]["name"] == "Acme")
    assert acme["attributes"] == '{"tier": "gold"}' and acme["description"] == "A client."

    erased = await client.post("/v1/memories/delete", json={"user_id": u, "all": True})
    assert (await wait_task(client, erased.json()["task_id"]))["status"] == "completed"
    assert (await client.get("/v1/graph/facts", params={"user_id": u, "name": "Acme"})).status_code == 404
    imported = await client.post("/v1/import", content=resp.content, headers={"content-type": "application/x-ndjson"})
    assert imported.status_code == 202, imported.text
    assert (await wait_task(client, imported.json()["task_id"], timeout=60))["status"] == "completed"
    page = await facts(client, u, name="Acme")
    assert page["entity"]["attributes"] == {"tier": "gold"} and page["entity"]["description"] == "A client."
    assert [(f["subject"]["name"], f["confidence"]) for f in page["items"]] == [("Alice", 0.7)]


async def test_coalesced_writes_each_report_their_own_entities(client: httpx.AsyncClient) -> None:
    """Concurrent writes of one user may share a graph transaction (GraphWriter); each task reports its own part."""
    u = unique("gco")
    tools = ["Redis", "Kafka", "Terraform", "Ansible", "Docker", "Kubernetes", "Grafana", "Prometheus"]
    accepted = await asyncio.gather(*(client.post("/v1/memories/raw", json={
        "user_id": u, "content": f"I use {tool} every day.", "category": "technical_skill"}) for tool in tools))
    results = [(await wait_task(client, r.json()["task_id"], timeout=60))["result"] for r in accepted]
    for tool, result in zip(tools, results, strict=True):
        named = {e["name"] for e in result["entities"]}
        assert tool in named and not (named & (set(tools) - {tool})), (tool, named)
        assert result["relation_count"] == 1


async def test_a_run_reports_the_entities_its_tool_calls_touched(client: httpx.AsyncClient) -> None:
    u = unique("grun")
    pg = (await done(client, "/v1/graph/entities", {"user_id": u, "name": "Postgres", "type": "service"}
                       ))["resolution"]["entity_id"]
    resp = await client.post("/v1/runs", json={"user_id": u, "task": "Fix the database", "steps": [
        {"seq": 0, "action": "check", "tool_calls": [
            {"tool": "Bash", "arguments": {"command": "psql"}, "touched": [
                {"name": "Postgres", "type": "service"}, {"name": "pg_hba.conf", "type": "file"}]}]}]})
    assert resp.status_code == 202, resp.text
    task = await wait_task(client, resp.json()["task_id"])
    assert task["status"] == "completed", task
    result = task["result"]
    decisions = {e["name"]: (e["decision"], e["entity_id"]) for e in result["entities"]}
    assert decisions["Postgres"] == ("existing", pg) and decisions["pg_hba.conf"][0] == "created"
    assert result["entity_count"] == 2 and result["relation_count"] == 0
