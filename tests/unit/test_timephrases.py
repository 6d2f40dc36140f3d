"""Time phrases of search queries (service/text/timephrases.py), with the real dateparser."""

from __future__ import annotations

from datetime import UTC, datetime

from service.text.timephrases import anchor, event_window, find_event_relation, find_time_window, tense


def test_a_query_without_time_stays_without_one_on_repeat() -> None:
    now = datetime(2024, 6, 15, 12, 0, tzinfo=UTC)
    for _ in range(3):  # the repeats are answered from the per-day memo of timeless queries
        assert find_time_window("which editor theme do I prefer", now) is None


def test_a_found_phrase_is_resolved_against_each_searchs_time() -> None:
    first = find_time_window("what did I cook yesterday", datetime(2024, 6, 15, 12, 0, tzinfo=UTC))
    again = find_time_window("what did I cook yesterday", datetime(2024, 6, 20, 9, 0, tzinfo=UTC))
    assert first is not None and again is not None
    assert (first.start, first.end) == (datetime(2024, 6, 14, tzinfo=UTC), datetime(2024, 6, 15, tzinfo=UTC))
    assert (again.start, again.end) == (datetime(2024, 6, 19, tzinfo=UTC), datetime(2024, 6, 20, tzinfo=UTC))
    month = find_time_window("the trip in May 2023", datetime(2024, 6, 15, tzinfo=UTC))
    assert month is not None and month.period == "month"
    assert (month.start, month.end) == (datetime(2023, 5, 1, tzinfo=UTC), datetime(2023, 6, 1, tzinfo=UTC))


def test_a_time_named_by_an_event_is_its_period_before_or_after_the_event_day() -> None:
    week = find_event_relation("What did Melanie do the week before the concert?")
    assert week is not None and (week.period, week.days, week.before, week.event) == ("week", 7, True, "concert")
    concert = datetime(2023, 6, 20, 21, 0, tzinfo=UTC)
    window = event_window(week, concert)
    assert (window.start, window.end) == (datetime(2023, 6, 13, tzinfo=UTC), datetime(2023, 6, 20, tzinfo=UTC))
    days = find_event_relation("What did I cook 3 days after my sister's wedding")
    assert days is not None and (days.days, days.before, days.event) == (3, False, "sister's wedding")
    after = event_window(days, concert)
    assert (after.start, after.end) == (datetime(2023, 6, 21, tzinfo=UTC), datetime(2023, 6, 24, tzinfo=UTC))
    for plain in ("the week before last", "the day before yesterday", "what did we do before the concert",
                  "I like the week"):
        assert find_event_relation(plain) is None, plain


def test_a_plan_resolves_forward_and_a_report_backward_from_when_it_was_said() -> None:
    monday = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)  # Monday 30 November 2026

    def day(text: str) -> str | None:
        window = anchor(text, monday)
        return window.start.date().isoformat() if window else None

    assert day("Tom and I are meeting on Friday") == "2026-12-04"
    assert day("I have a dentist appointment on Tuesday") == "2026-12-01"
    assert day("I'll call her next Monday") == "2026-12-07"
    assert day("tomorrow I fly to Oslo") == "2026-12-01"
    assert day("I ran my first half marathon last Saturday") == "2026-11-28"
    assert day("We went hiking on Saturday") == "2026-11-28"
    assert day("the party was on Friday") == "2026-11-27"
    assert day("I went to the dentist yesterday") == "2026-11-29"
    assert tense("what did I do on Friday?", default="past") == "past"
    assert tense("what am I doing on Friday?", default="past") == "future"
    assert find_time_window("what did I do on Friday?", monday).start.date().isoformat() == "2026-11-27"  # type: ignore[union-attr]
    assert find_time_window("what am I doing on Friday?", monday).start.date().isoformat() == "2026-12-04"  # type: ignore[union-attr]


def test_weekends_and_the_same_day_resolve_from_when_it_was_said() -> None:
    monday = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)
    saturday = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)

    def window(text: str, at: datetime) -> tuple[str, str, str] | None:
        w = anchor(text, at)
        return (w.start.date().isoformat(), w.end.date().isoformat(), w.period) if w else None

    assert window("Big news: we moved to Porto last weekend!", monday) == ("2026-12-05", "2026-12-07", "weekend")
    assert window("this weekend we go hiking", monday) == ("2026-12-12", "2026-12-14", "weekend")
    assert window("this weekend we go hiking", saturday) == ("2026-12-05", "2026-12-07", "weekend")  # under way
    assert window("we moved last weekend", saturday) == ("2026-11-28", "2026-11-30", "weekend")
    assert window("I saw her this morning", monday) == ("2026-12-07", "2026-12-08", "day")
    assert window("tonight we cook for eight", monday) == ("2026-12-07", "2026-12-08", "day")
    found = find_time_window("what did I do last weekend?", monday)
    assert found is not None and found.start.date().isoformat() == "2026-12-05" and found.period == "weekend"
