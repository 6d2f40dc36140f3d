"""The offline rules of a correction (service/memory/changes.py): what says that something changed, which words name
the slot, and which clause of a message the change is in."""

from __future__ import annotations

import pytest

from service.core.embedding_models import calibration
from service.memory.changes import (
    changed_words,
    changes,
    frames,
    named_slots,
    replaced_values,
    said_by,
    same_slot,
    slot_words,
)


@pytest.mark.parametrize(("text", "changed"), [
    ("Actually I prefer aisle seats now.", True),
    ("insurance jumped to $188 a month", True),
    ("I'm no longer vegetarian", True),
    ("my new manager is Priya Raman", True),
    ("I have a new manager, Priya Raman.", True),
    ("new clients and Northwind both pay 95 an hour", False),  # "new" describes, it names no changed slot
    ("the new lease ends March 31", False),
    ("I prefer window seats when I fly.", False),
])
def test_what_says_that_something_changed(text: str, changed: bool) -> None:
    assert changes(text) is changed


def test_slot_words_leave_out_names_function_and_change_words() -> None:
    assert slot_words("I sold the Civic, now I drive a Tesla Model 3.") == {"drive"}
    assert slot_words("Rent is 1,300 a month. We run CI on Jenkins") == {"rent", "ci"}  # sentence starts count
    assert slot_words("my contact at Northwind changed") == {"contact"}


def test_named_slots_are_the_words_a_change_names() -> None:
    assert named_slots("the barn flooded so the wedding moved to June 14") == {"wedding"}
    assert named_slots("We moved our CI to GitHub Actions") == {"ci"}
    assert named_slots("The rent is now 1,450") == {"rent"}
    assert named_slots("new drummer is Lina") == {"drummer"}


def test_only_the_changing_clause_names_the_slot() -> None:
    assert changed_words("switched to Asics Novablast shoes, the physio thinks the old ones hurt") == {"shoe"}
    assert changed_words("From now on, call me Sam in your replies.") == {"call", "replie"}  # a short clause joins
    assert changed_words("For the hotel, actually, make that 150 euros.") == {"hotel", "euro"}


def test_what_one_speaker_said() -> None:
    assert said_by("user: I drive a Civic.\nassistant: Noted, a Civic.", None) == "I drive a Civic."
    assert said_by("Takes coffee black", None) == "Takes coffee black"
    chat = "user: Joanna: I moved to Denver.\nuser: Nate: I live in Boise now."
    assert said_by(chat, "joanna") == "I moved to Denver." and said_by(chat, "nate") == "I live in Boise now."
    assert said_by(chat, None) == ""  # an unlabelled message is the user's, not Joanna's or Nate's
    assert said_by("Nate: Playing video games is my main hobby.", "joanna") == ""


CAL = calibration("e5-small-v2")


@pytest.mark.parametrize(("new", "old"), [
    ("Big news: we moved to Porto last weekend!", "I live in Lisbon, near the river."),
    ("My manager is Sarah Lin now, Tom moved to another team.", "My manager is Tom Becker."),
    ("We switched Atlas from Flask to FastAPI last week.",
     "I work on a project called Atlas; it's a Flask app with a PostgreSQL database."),
    ("Every pipeline runs on GitHub Actions now.", "Our CI runs on Jenkins."),
    ("I just started at Stripe, so I no longer work at Acme.", "I work at Acme as a backend engineer."),
    ("Actually my sister moved to Berlin in October.", "My sister lives in Lyon."),
    ("I switched from tabs to spaces for this repo now.", "I indent with tabs everywhere."),
])
def test_a_correction_in_natural_wording_names_the_slot_it_replaces(new: str, old: str) -> None:
    """Low cosine on purpose: the frame or the named old value decides, not the model."""
    assert changes(new) and same_slot(new, old, 0.0, CAL)


@pytest.mark.parametrize(("new", "old"), [
    ("My brother just moved to Berlin.", "My sister lives in Lyon."),  # another relative's city
    ("My sister moved to Berlin now.", "I live in Lisbon, near the river."),  # a relative's, not the user's
    ("I moved the standup to Friday now.", "I live in Lisbon, near the river."),  # moving a meeting is no move
    ("We switched Atlas from Flask to FastAPI last week.", "Our Orion service is a Flask app."),  # another project
    ("My manager is Sarah Lin now.", "Our CI runs on Jenkins."),
])
def test_a_change_about_another_subject_or_slot_replaces_nothing(new: str, old: str) -> None:
    assert not same_slot(new, old, 0.0, CAL)


def test_frames_name_slot_and_whose() -> None:
    assert frames("I live in Lisbon") == {("home", "user")}
    assert frames("We're based in Tokyo now") == {("home", "user")}
    assert frames("My sister lives in Lyon") == {("home", "sister")}
    assert frames("I report to Dana") == {("manager", "user")}
    assert frames("Our CI runs on Jenkins") == {("ci", "")}
    assert frames("I work on a project called Atlas") == frozenset()  # on a project is not at an employer
    assert replaced_values("We switched Atlas from Flask to FastAPI") == [("Atlas", "Flask")]
