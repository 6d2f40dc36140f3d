"""Words people use for one slot (service/text/slots.py): a query gains its slot's other words, a name gains
nothing, and the correction rules see one slot in two wordings."""

from __future__ import annotations

from service.core.embedding_models import DEFAULT_CALIBRATION
from service.memory.changes import same_slot, slot_words
from service.memory.currency import newer_first
from service.text.slots import canonical, companions, widened
from tests.unit.test_currency import hit


def test_a_query_gains_the_other_words_of_its_slot() -> None:
    assert {"pipeline", "build"} <= set(companions("Which CI system does my team use at the moment?"))
    assert {"budget", "max"} <= set(companions("How much can we spend on a house?"))
    assert companions("Who do I report to?") == ["boss", "manager"]  # a phrase names the slot
    assert "apartment" in companions("What is my current address?")
    assert companions("What is my dog Max called?") == []  # "Max" is a name here, not the budget's word
    assert companions("Which editor do I use?") == []
    assert widened("Which editor do I use?") == "Which editor do I use?"
    assert "max" not in companions("What is our max budget?")  # what the query says itself is not added


def test_two_wordings_of_one_slot_are_one_slot_word() -> None:
    assert canonical("pipeline") == canonical("build") == "ci"
    assert canonical("editor") == "editor"
    assert slot_words("every pipeline runs on GitHub Actions now") & slot_words("our CI runs on Jenkins") == {"ci"}
    assert slot_words("we raised our max to 500k") & slot_words("budget around 450k") == {"budget"}


def test_a_change_in_other_words_moves_above_the_value_it_replaces() -> None:
    old = hit("old", "my partner Efua and I are starting to look for a house, budget around 450k", "2026-01-10")
    new = hit("new", "rates dropped a bit so we raised our max to 500k", "2026-02-21")
    assert [r.id for r in newer_first([old, new], "How much can we spend on a house?")] == ["new", "old"]
    ci_old = hit("j", "ugh the build has been red all morning. the Jenkins agent ran out of disk again", "2026-01-20")
    ci_new = hit("g", "big news, the migration is done: every pipeline runs on GitHub Actions now", "2026-02-03")
    assert [r.id for r in newer_first([ci_old, ci_new], "Which CI system does my team use?")] == ["g", "j"]
    # another slot in the same words moves nothing: the editor is not the CI
    editor = hit("e", "I live in Neovim, skip the VS Code menus", "2026-01-12")
    assert [r.id for r in newer_first([editor, ci_new], "Which editor do I use?")] == ["e", "g"]


def test_the_write_rules_need_the_model_too_when_only_a_slot_word_is_shared() -> None:
    cal = DEFAULT_CALIBRATION
    new, old = "we raised our max to 500k now", "budget around 450k for the house"
    assert same_slot(new, old, cal.slot, cal)  # one slot in two wordings, close by the model
    assert not same_slot(new, old, cal.slot_named - 0.1, cal)  # far by the model: two slots
