"""Rows and ids of the Neo4j graph store: input bounds, deterministic ids, the rows a write sends, and the
mapping of result rows to GraphFact."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime
from typing import Any

import structlog

from service.core.domain import ID_NAMESPACE, Memory
from service.core.errors import DomainError
from service.stores.graph import EntityNameRules, EntityRef, GraphFact, MemoryLinks, group_id

log = structlog.get_logger(__name__)

# ---- bounds ---------------------------------------------------------------------------------

MAX_ID_CHARS = 128
MAX_GROUP_CHARS = 160
MAX_GROUPS = 64
MAX_QUERY_CHARS = 2000
MAX_TERMS = 32
MAX_TERM_CHARS = 64
MAX_SEARCH_LIMIT = 100
MAX_PAGE_LIMIT = 500
MAX_NAME_CHARS = 200
MAX_FACT_CHARS = 2000
MAX_PREDICATE_CHARS = 100
MAX_ALIASES = 20
MAX_ROLES = 8  # what the memories say an entity is ("plumber"), kept on its node



def iso_utc(value: str | None) -> str | None:
    """An ISO-8601 date or datetime as a UTC datetime string in the service's format
    (`datetime.isoformat()`, so ISO strings compare correctly as strings). A date is its midnight
    UTC, a naive datetime is taken as UTC. None for None or an unparseable value."""
    if not value:
        return None
    text = value.strip()[:64]
    try:
        if len(text) == 10:
            d = date.fromisoformat(text)
            return datetime(d.year, d.month, d.day, tzinfo=UTC).isoformat()
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).isoformat()


def utc_now() -> str:
    return datetime.now(UTC).isoformat()


def check_id(value: str, what: str, limit: int = MAX_ID_CHARS) -> str:
    if not isinstance(value, str) or not value or len(value) > limit:
        raise DomainError(f"{what} must be a non-empty string of at most {limit} characters")
    return value


def check_groups(groups: list[str] | None) -> list[str] | None:
    if groups is None:
        return None
    if len(groups) > MAX_GROUPS:
        raise DomainError(f"at most {MAX_GROUPS} graph groups per read")
    return [check_id(g, "group", MAX_GROUP_CHARS) for g in groups]


def check_cursor(cursor: str | None) -> str:
    return "" if cursor is None else check_id(cursor, "cursor")


def clamp(limit: int, top: int) -> int:
    return max(1, min(int(limit), top))


def memory_row(m: Memory) -> dict[str, Any]:
    return {
        "id": m.id,
        "user_id": m.user_id,
        "content": m.content,
        "category": m.category,
        "scope": m.scope.value,
        "project_id": m.project_id,
        "group_id": group_id(m.scope.value, m.project_id),
        "agent_id": m.agent_id,
        "hash": m.hash,
        "metadata": json.dumps(m.metadata, sort_keys=True),
        "created_at": m.created_at,
        "updated_at": m.updated_at,
        "task_id": m.task_id,
        "sensitivity": m.sensitivity.value,
    }


def entity_name(name: str) -> str:
    return name.strip()[:MAX_NAME_CHARS]


def entity_id(user_id: str, group: str, name: str) -> str:
    return str(uuid.uuid5(ID_NAMESPACE, f"entity|{user_id}|{group}|{entity_name(name).casefold()}"))


def meaning_name(name: str, family: str, meaning: str) -> str:
    """What the id of a name's other meaning is derived from (docs/identity.md, Meanings): the name, its type family
    and the head noun of its role."""
    return f"{name}|{family}|{meaning}"


def relation_id(user_id: str, group: str, subject: str, predicate: str, obj: str) -> str:
    key = f"rel|{user_id}|{group}|{entity_name(subject).casefold()}|{predicate}|{entity_name(obj).casefold()}"
    return str(uuid.uuid5(ID_NAMESPACE, key))


def link_rows(
    memories: list[Memory], links: list[MemoryLinks], names: EntityNameRules, default_valid_at: str | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Entity, mention and relation rows for the links. A relation's valid_at is its stated time,
    else `default_valid_at`, else the memory's acceptance time (normalised to UTC ISO)."""
    by_id = {m.id: m for m in memories}
    entities: dict[str, dict[str, Any]] = {}
    mentions: list[dict[str, Any]] = []
    relations: list[dict[str, Any]] = []
    details: list[dict[str, Any]] = []  # description / attributes a structured write gave an entity

    def entity(m: Memory, group: str, ref: EntityRef) -> tuple[str, str]:
        """One row per entity id; every spelling seen in the batch becomes a name or an alias. A spelling whose
        role disagrees with the roles its row has so far is another meaning (docs/identity.md): a row of its own.
        Returns the id and the name relation ids are derived from: a meaning's qualified name, else the spelling."""
        name = entity_name(ref.name)
        id_name = name
        eid = ref.id or entity_id(m.user_id, group, name)
        role = names.role(m.content, ref.name, ref.role)
        first = entities.get(eid)
        if first is not None and not ref.id and (meaning := names.other_meaning([role] if role else [],
                                                                               first["roles"])):
            id_name = meaning_name(name, names.type_family(ref.type), meaning)
            eid = entity_id(m.user_id, group, id_name)
        spellings = [name, *(a for a in (entity_name(x) for x in ref.aliases[:MAX_ALIASES]) if a)]
        row = entities.get(eid)
        if row is None:
            row = entities[eid] = {"id": eid, "user_id": m.user_id, "group_id": group, "name": name,
                                   "name_lc": name.casefold(), "type": ref.type[:MAX_PREDICATE_CHARS],
                                   "names": [name], "keys": names.keys_of([name]), "roles": [], "id_name": id_name,
                                   "created_at": m.created_at, "ft_key": ft_key(m.user_id, group), "pinned": False}
        elif row["type"] == "thing":
            row["type"] = ref.type[:MAX_PREDICATE_CHARS]
        row["pinned"] = row["pinned"] or bool(ref.id)  # named by its id: no other meaning is read into it
        if role and role not in row["roles"] and len(row["roles"]) < MAX_ROLES:
            row["roles"].append(role)
        if any(n not in row["names"] for n in spellings):
            row["names"] = list(dict.fromkeys([*row["names"], *spellings]))
            row["keys"] = names.keys_of(row["names"])
        if ref.description is not None or ref.attributes is not None:
            details.append({"id": eid, "memory_id": m.id, "description": ref.description,
                            "attributes": ref.attributes})
        return eid, row["id_name"] if row["id_name"] != row["name"] else ref.name  # a meaning's, else as written

    for link in links:
        m = by_id[link.memory_id]
        group = group_id(m.scope.value, m.project_id)
        for ref in link.entities:
            if entity_name(ref.name):
                mentions.append({"memory_id": m.id, "entity_id": entity(m, group, ref)[0]})
        known = {entity_name(e.name).casefold(): e for e in link.entities}

        for rel in link.relations:
            if not entity_name(rel.subject) or not entity_name(rel.object) or not rel.predicate.strip():
                continue
            predicate = rel.predicate.strip()[:MAX_PREDICATE_CHARS]
            src, src_name = entity(m, group, _end(known, rel.subject))
            dst, dst_name = entity(m, group, _end(known, rel.object))
            mentions += [{"memory_id": m.id, "entity_id": src}, {"memory_id": m.id, "entity_id": dst}]
            valid_at = iso_utc(rel.valid_at) or iso_utc(default_valid_at) or iso_utc(m.created_at) or m.created_at
            relations.append({
                "id": relation_id(m.user_id, group, src_name, predicate, dst_name),
                "source_id": src, "target_id": dst, "user_id": m.user_id, "group_id": group,
                "predicate": predicate, "fact": rel.fact[:MAX_FACT_CHARS], "valid_at": valid_at,
                "created_at": m.created_at, "memory_id": m.id, "updated_at": m.updated_at,
                "ft_key": ft_key(m.user_id, group), "confidence": rel.confidence,
            })
    # Sorted by id: concurrent writers (other processes) take the nodes' locks in one global order.
    unique_mentions = sorted({(r["entity_id"], r["memory_id"]): r for r in mentions}.values(),
                             key=lambda r: (r["entity_id"], r["memory_id"]))
    return {
        "entities": sorted(entities.values(), key=lambda r: str(r["id"])),
        "mentions": unique_mentions,
        "relations": sorted(relations, key=lambda r: (min(r["source_id"], r["target_id"]), r["id"], r["memory_id"])),
        "details": details,
    }



def _end(known: dict[str, EntityRef], name: str) -> EntityRef:
    """A relation's end: the entity of that name its link lists (its type, and its id when pinned), else generic."""
    ref = known.get(entity_name(name).casefold())
    return EntityRef(name, ref.type, id=ref.id, role=ref.role) if ref is not None else EntityRef(name)


def fact_of(row: dict[str, Any], score: float = 0.0) -> GraphFact:
    return GraphFact(
        id=str(row["id"]), fact=str(row.get("fact") or ""), predicate=str(row.get("predicate") or ""),
        source=str(row.get("source") or ""), target=str(row.get("target") or ""),
        group_id=str(row.get("group_id") or "global"), valid_at=row.get("valid_at"),
        invalid_at=row.get("invalid_at"), expired_at=row.get("expired_at"),
        memory_ids=list(row.get("memory_ids") or []), created_at=row.get("created_at"), score=score,
    )


def edge_item(row: dict[str, Any]) -> dict[str, object]:
    item: dict[str, object] = dict(fact_of(row).__dict__)
    item["source_id"] = row.get("source_id")
    item["target_id"] = row.get("target_id")
    return item

def ft_key(user_id: str, group: str) -> str:
    """One Lucene token per (user, group): letters and digits only, so the analyzer keeps it whole."""
    return "k" + uuid.uuid5(ID_NAMESPACE, f"ft|{user_id}|{group}").hex


def offset_of(cursor: str | None) -> int:
    """An offset cursor of these listings; a malformed one is bad input (400), as in every other listing."""
    if not cursor:
        return 0
    if not cursor.isdigit() or len(cursor) > 9:
        raise DomainError("cursor is not one this listing returned")
    return int(cursor)


RUN_FT_GROUP = "runs"  # the tenant token of run and tool-call documents: ft_key(user, RUN_FT_GROUP)


def run_uid(user_id: str, run_id: str) -> str:
    return uuid.uuid5(ID_NAMESPACE, f"run|{user_id}|{run_id}").hex
