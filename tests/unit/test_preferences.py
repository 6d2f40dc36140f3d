"""The supersession rules of service/memory/preferences.py: slots, the newest wins whatever order jobs run in,
explicit corrections of an amount."""

from __future__ import annotations

import pytest

from service.core.domain import Memory, Scope, content_hash
from service.core.errors import DomainError
from service.memory import preferences
from service.stores.vector import Boundary, MemoryFilter


def _pref(id: str, content: str, *, at: str, task: str, kind: str | None = "budget",
          applies_to: tuple[str, ...] = (), project: str | None = None) -> Memory:
    return Memory(id=id, user_id="u", content=content, category="preference",
                  scope=Scope.PROJECT if project else Scope.GLOBAL, project_id=project, hash=content_hash(content),
                  created_at=at, updated_at=at, task_id=task, kind=kind, applies_to=list(applies_to))


def test_the_newest_of_a_slot_wins_whatever_order_the_jobs_ran_in() -> None:
    a = _pref("a", "Dinner at 50 dollars", at="2026-01-01T00:00:01Z", task="t1", applies_to=("Dinner",))
    b = _pref("b", "Dinner at 80 dollars", at="2026-01-01T00:00:02Z", task="t2", applies_to=("dinner",))
    c = _pref("c", "Offsite at 900 dollars", at="2026-01-01T00:00:03Z", task="t3", applies_to=("offsite",))
    d = _pref("d", "Dinner at 70 dollars", at="2026-01-01T00:00:02Z", task="t2", applies_to=("dinner",),
              project="p")  # another scope
    for order in ([a, b, c, d], [d, c, b, a], [b, a, d, c]):
        assert sorted((m.id, by) for m, by in preferences.to_supersede(order)) == [("a", "b")]
    # no kind: nothing competes with it
    assert preferences.to_supersede([_pref("x", "a", at="1", task="t", kind=None),
                                     _pref("y", "b", at="2", task="t", kind=None)]) == []


def test_within_one_job_the_later_memory_wins() -> None:
    first = _pref("m0", "Dinner at 50 dollars", at="1", task="t")
    second = _pref("m1", "Dinner at 80 dollars", at="1", task="t")
    out = preferences.within_job([first, second], "2026-01-01T00:00:00Z")
    assert out[0].superseded_by == "m1" and out[0].superseded_at == "2026-01-01T00:00:00Z"
    assert out[1].superseded_by is None


@pytest.mark.parametrize(("text", "amount"), [
    ("Actually, make that 80 dollars.", "80 dollars"),
    ("No, make it $80 instead", "$80"),
    ("My budget is 50 dollars. Actually, change that to 75 euros!", "75 euros"),
    ("Sorry, it should be €120.", "€120"),
    ("Make that a window seat.", None),  # not an amount: left to the extractor
    ("I spent 80 dollars on it.", None),  # not a correction
])
def test_an_explicit_correction_of_an_amount(text: str, amount: str | None) -> None:
    assert preferences.correction_value(text) == amount


def test_a_corrected_preference_keeps_kind_scope_and_applies_to() -> None:
    earlier = _pref("e", "Keep the dinner budget at 50 dollars.", at="1", task="t1", applies_to=("dinner",),
                    project="p")
    new = preferences.corrected(earlier, "80 dollars", id="n", task_id="t2", at="2", occurred_at="2", source=[])
    assert new is not None
    assert new.content == "Keep the dinner budget at 80 dollars." and new.hash == content_hash(new.content)
    assert (new.id, new.kind, new.applies_to, new.scope, new.project_id) == ("n", "budget", ["dinner"],
                                                                             Scope.PROJECT, "p")
    assert preferences.corrected(_pref("z", "Window seats", at="1", task="t"), "80 dollars", id="n",
                                 task_id="t", at="2", occurred_at="2", source=[]) is None


def test_kind_and_applies_to_belong_to_preferences() -> None:
    assert preferences.preference_scope("preference", " Budget ", ["Dinner", " Dinner", ""]) == ("budget", ["Dinner"])
    with pytest.raises(DomainError):
        preferences.preference_scope("tech_stack", "budget", [])


def test_active_only_filters_hide_superseded_memories() -> None:
    old = _pref("a", "x", at="1", task="t").model_copy(update={"superseded_by": "b"})
    assert MemoryFilter(user_id="u").matches(old)
    assert not MemoryFilter(user_id="u", active_only=True).matches(old)
    assert Boundary("u", Scope.GLOBAL, None).filter().active_only  # the dedup sweep leaves history alone
