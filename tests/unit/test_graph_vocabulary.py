"""The graph's vocabulary and the community grouping (pure): predicates and types normalised, synonyms found by
queries, two clusters found as two communities."""

from __future__ import annotations

from typing import Any

from service.graph_api.communities import detect
from service.graph_api.vocabulary import (
    ENTITY_TYPES,
    PREDICATES,
    entity_type,
    normalise_predicate,
    predicate_forms,
    type_forms,
)
from service.stores.graph import SINGLE_VALUED_PREDICATES


def test_predicates_are_normalised_and_free_text_kept_as_snake_case() -> None:
    assert normalise_predicate("Works for") == "works_at"
    assert normalise_predicate("  is working on ") == "works_on"
    assert normalise_predicate("built-with") == "uses"
    assert normalise_predicate("Mentored by") == "mentored_by"  # not in the set: kept, snake_case
    assert normalise_predicate("!!") == ""
    assert set(PREDICATES) >= SINGLE_VALUED_PREDICATES
    assert {"works_at", "works_for", "employed_by"} <= set(predicate_forms("employed by"))
    assert predicate_forms("mentored by") == ["mentored_by"]


def test_entity_types_have_one_vocabulary_with_synonyms() -> None:
    assert entity_type("Organisation") == entity_type("company") == "organization"
    assert entity_type("city") == "place" and entity_type("editor") == "tool" and entity_type("") == "thing"
    assert entity_type("Spaceship") == "spaceship"  # unknown: kept
    assert set(type_forms("organization")) >= {"organization", "organisation", "company", "team"}
    assert all(entity_type(t) == t for t in ENTITY_TYPES)


def rel(a: str, b: str, predicate: str = "knows") -> dict[str, Any]:
    return {"source": a, "target": b, "predicate": predicate, "fact": f"{a} {predicate} {b}",
            "s": {"id": a, "name": a.upper(), "type": "person"}, "o": {"id": b, "name": b.upper(), "type": "person"}}


def test_two_dense_clusters_with_a_bridge_are_two_communities() -> None:
    left, right = ["a", "b", "c", "d"], ["w", "x", "y", "z"]
    rows = [rel(p, q) for group in (left, right) for i, p in enumerate(group) for q in group[i + 1:]]
    rows.append(rel("d", "w", "met"))
    found = detect("u1", rows)
    assert sorted(sorted(m["id"] for m in c["members"]) for c in found) == [left, right]
    for c in found:
        assert c["members"][0]["id"] in ("d", "w")  # the bridge's ends rank first (more relations in all)
        assert c["predicates"] == ["knows"] and c["summary"].endswith(": knows")
        assert len(c["facts"]) == 6  # the relations inside it, not the bridge
    assert detect("u1", rows) == found  # the same graph, the same communities (fixed seed)
    assert [c["id"] for c in detect("u2", rows)] != [c["id"] for c in found]  # ids are per user
    assert detect("u1", []) == []
