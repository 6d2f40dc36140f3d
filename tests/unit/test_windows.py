"""Interaction windows and source ids (service/memory/windows.py) and the offline extractor's sources."""

from __future__ import annotations

from typing import Any

from service.ai.offline.extractor import OfflineExtractor
from service.core.domain import Message
from service.memory.windows import (
    first_time,
    interaction_windows,
    parse_timestamp,
    source_id,
    source_ids,
    valid_indexes,
)

ACCEPTED = "2026-01-10T12:00:00+00:00"


def msgs(*items: tuple[str, str] | dict[str, Any]) -> list[Message]:
    return [Message(**i) if isinstance(i, dict) else Message(role=i[0], content=i[1]) for i in items]  # type: ignore[arg-type]


def test_windows_group_consecutive_messages_and_never_cross_a_covered_one() -> None:
    conv = msgs(("user", "hi"), ("assistant", "hello"), ("user", "I prefer tabs."), ("assistant", "ok"),
                ("user", "thanks"))
    windows = interaction_windows(conv, covered={2})
    assert [w.indexes for w in windows] == [(0, 1), (3,), (4,)]  # a user's message opens a turn of its own
    assert windows[0].content == "user: hi\nassistant: hello"
    assert windows[1].content == "assistant: ok"


def test_a_window_follows_the_turn_and_never_joins_one_speakers_two_messages() -> None:
    conv = msgs(("user", "I'm allergic to peanuts."), ("user", "Tom and I are meeting on Friday to plan Orion."),
                ("assistant", "Noted, a meeting with Tom on Friday."), ("assistant", "Anything else?"),
                ("user", "No, thanks"))
    assert [w.indexes for w in interaction_windows(conv, set())] == [(0,), (1, 2), (3,), (4,)]
    # an imported transcript: every line's role is "user", the speakers are named in the text
    chat = msgs(("user", "Caroline: I went to the support group."), ("user", "Melanie: How was it?"),
                ("user", "Melanie: Did you like it?"), ("user", "Caroline: It was great."))
    assert [w.indexes for w in interaction_windows(chat, set())] == [(0, 1), (2, 3)]


def test_windows_hold_at_most_four_messages_and_the_char_budget() -> None:
    names = ["Ann", "Bob", "Cy", "Dee", "Eve", "Fay", "Gus", "Hal", "Ivy"]
    conv = msgs(*[("user", f"{name}: m{i}") for i, name in enumerate(names)])
    assert [w.indexes for w in interaction_windows(conv, set(), max_messages=4)] == [(0, 1, 2, 3), (4, 5, 6, 7), (8,)]
    conv = msgs(("user", "a" * 500), ("assistant", "b" * 500), ("user", "c" * 500))
    assert [w.indexes for w in interaction_windows(conv, set(), max_chars=1200)] == [(0, 1), (2,)]
    # exactly at the budget still fits (lines of 600 and 599 chars and one newline); one more char does not
    conv = msgs(("user", "a" * 594), ("assistant", "b" * 588))
    assert [w.indexes for w in interaction_windows(conv, set(), max_chars=1200)] == [(0, 1)]
    conv = msgs(("user", "a" * 595), ("assistant", "b" * 588))
    assert [w.indexes for w in interaction_windows(conv, set(), max_chars=1200)] == [(0,), (1,)]


def test_a_long_message_is_a_window_of_its_own_and_kept_whole() -> None:
    conv = msgs(("user", "short"), ("tool", "x" * 5000), ("user", "after"))
    windows = interaction_windows(conv, set())
    assert [w.indexes for w in windows] == [(0,), (1,), (2,)]
    assert windows[1].content == "tool: " + "x" * 5000


def test_blank_messages_are_skipped_without_splitting_a_window() -> None:
    conv = msgs(("user", "one"), ("assistant", "   "), ("tool", "two"))
    [window] = interaction_windows(conv, set())
    assert window.indexes == (0, 2) and window.content == "user: one\ntool: two"


def test_every_message_in_order_is_either_covered_or_in_exactly_one_window() -> None:
    conv = msgs(*[("user" if i % 3 else "assistant", f"text {i} " * (i * 7)) for i in range(1, 30)])
    covered = {3, 4, 11, 20, 28}
    windows = interaction_windows(conv, covered)
    flat = [i for w in windows for i in w.indexes]
    assert flat == sorted(flat) and sorted(flat + sorted(covered)) == list(range(len(conv)))
    assert all(len(w.indexes) <= 4 and (len(w.content) <= 1200 or len(w.indexes) == 1) for w in windows)
    for w in windows:  # consecutive: no covered message inside a window
        assert not covered & set(range(w.indexes[0], w.indexes[-1] + 1))


def test_source_ids_are_message_ids_else_indexes() -> None:
    conv = msgs({"role": "user", "content": "a", "id": "m-1"}, ("assistant", "b"), {"role": "user", "content": "c",
                                                                                     "id": "m-3"})
    assert [source_id(i, m) for i, m in enumerate(conv)] == ["m-1", "1", "m-3"]
    assert source_ids([2, 0, 2], conv) == ["m-1", "m-3"]
    assert valid_indexes([5, -1, 2, 0, 2], 3) == [0, 2]


def test_timestamps_parse_leniently_to_utc_iso() -> None:
    assert parse_timestamp("2024-03-02T10:00:00Z", ACCEPTED) == "2024-03-02T10:00:00+00:00"
    assert parse_timestamp("2024-03-02T10:00:00+01:00", ACCEPTED) == "2024-03-02T09:00:00+00:00"
    assert parse_timestamp("2024-03-02 10:00", ACCEPTED) == "2024-03-02T10:00:00+00:00"  # no zone: UTC
    assert parse_timestamp("March 2, 2024 3pm", ACCEPTED) == "2024-03-02T15:00:00+00:00"
    assert parse_timestamp("Tue, 02 Mar 2024 10:00:00 +0100", ACCEPTED) == "2024-03-02T09:00:00+00:00"
    # relative phrases count from the acceptance time, so a replay parses the same
    assert parse_timestamp("yesterday 5pm", ACCEPTED) == "2026-01-09T17:00:00+00:00"
    for bad in (None, "", "   ", "not a time at all", "soon-ish"):
        assert parse_timestamp(bad, ACCEPTED) is None


def test_first_time_is_the_first_parseable_timestamp_else_acceptance() -> None:
    conv = msgs({"role": "user", "content": "a", "timestamp": "whenever"},
                {"role": "user", "content": "b", "timestamp": "2025-05-05T05:05:05Z"},
                ("user", "c"))
    assert first_time([2, 1, 0], conv, ACCEPTED) == "2025-05-05T05:05:05+00:00"
    assert first_time([0, 2], conv, ACCEPTED) == ACCEPTED
    assert first_time([], conv, ACCEPTED) == ACCEPTED


def test_offline_facts_name_the_messages_they_came_from() -> None:
    conv = msgs(("user", "Hello!"), ("user", "I prefer tabs over spaces."), ("assistant", "I prefer Java."),
                ("user", "We decided to use Redis for caching. I prefer tabs over spaces."))
    facts = OfflineExtractor().extract_sync(conv, "p1")
    by_content = {f.content: f.source_messages for f in facts}
    assert by_content["I prefer tabs over spaces."] == [1, 3]  # repeated later: one fact, both messages
    assert by_content["We decided to use Redis for caching."] == [3]
    assert all(f.source_messages for f in facts)  # always filled offline
