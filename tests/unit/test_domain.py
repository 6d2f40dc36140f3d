from __future__ import annotations

import pytest

from service.core.domain import CATEGORIES, Scope, check_category, content_hash, memory_id_for, normalise, resolve_scope
from service.core.errors import DomainError


def test_thirteen_categories_in_five_groups() -> None:
    assert len(CATEGORIES) == 13
    groups: dict[str, set[str]] = {}
    for c in CATEGORIES.values():
        groups.setdefault(c.group, set()).add(c.name)
    assert groups == {
        "semantic": {"preference", "personal_fact", "technical_skill", "domain_knowledge"},
        "project": {"tech_stack", "convention", "architecture", "dependency"},
        "episodic": {"decision", "interaction"},
        "procedural": {"workflow", "procedure"},
        "working": {"task_context"},
    }


@pytest.mark.parametrize(
    ("category", "scope", "project", "expected"),
    [
        ("preference", None, None, Scope.GLOBAL),
        ("preference", None, "p", Scope.GLOBAL),
        ("tech_stack", None, "p", Scope.PROJECT),
        ("decision", None, None, Scope.GLOBAL),
        ("decision", None, "p", Scope.PROJECT),
        ("workflow", Scope.GLOBAL, "p", Scope.GLOBAL),
        ("preference", Scope.PROJECT, "p", Scope.PROJECT),
    ],
)
def test_resolve_scope(category: str, scope: Scope | None, project: str | None, expected: Scope) -> None:
    assert resolve_scope(category, scope, project) is expected


def test_project_scope_without_project_is_an_error() -> None:
    with pytest.raises(DomainError, match="project_id"):
        resolve_scope("convention", None, None)
    with pytest.raises(DomainError, match="project_id"):
        resolve_scope("preference", Scope.PROJECT, None)


def test_unknown_category_lists_valid_ones() -> None:
    with pytest.raises(DomainError) as err:
        check_category("Preference")
    assert "preference" in str(err.value) and "task_context" in str(err.value)


def test_hash_uses_normalised_content() -> None:
    assert normalise("  Uses\tPNPM \n daily ") == "uses pnpm daily"
    assert content_hash("Uses PNPM daily") == content_hash("uses   pnpm\ndaily ")
    assert content_hash("uses pnpm daily") != content_hash("uses npm daily")
    assert len(content_hash("x")) == 32


def test_memory_ids_are_deterministic_per_task_and_index() -> None:
    assert memory_id_for("t1", 0) == memory_id_for("t1", 0)
    assert len({memory_id_for("t1", 0), memory_id_for("t1", 1), memory_id_for("t2", 0)}) == 3
