"""Time named in a search query ("last May", "in 2022", "on 8 June 2023", "two weeks ago") as a window of
occurred_at, found and resolved by `dateparser` (English) relative to the time of the search.

`dateparser.search.search_dates` also reads ordinary words as dates ("may" the verb, "we" as Wednesday),
so a match counts only when it carries a digit, spans more than one word, is a capitalised word inside the
query ("... in May"), or is one of the relative day words. The window's length follows the period
dateparser reports for the phrase: a day, a week (centred on the date), a month or a year.

A time named by an event ("the week before the concert", "the day after my sister's wedding") has no date of
its own: `find_event_relation` finds the shape (a period, before or after, the event's words) and the search
dates the event by the memory that best matches its words (`event_window`), then takes the period before or
after that memory's day.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

_DAY_WORDS = frozenset({"yesterday", "today", "tonight", "tomorrow"})
_PERIOD_DAYS = {"day": 1, "weekend": 3, "week": 7, "month": 31, "year": 366}
# "[N] day(s)/week(s)/... before|after [the|my|...] <event words>", the event ending at punctuation or the query's end
_EVENT_RELATION = re.compile(
    r"\b(?:(?P<count>\d{1,3})\s+)?(?P<period>day|weekend|week|month|year)s?\s+(?P<direction>before|after)\s+"
    r"(?:(?:the|my|our|his|her|their|that|this|your)\s+)?(?P<event>[^\W\d][\w'\u2019-]*(?:\s+[\w'\u2019-]+){0,5}?)"
    r"\s*(?=[?.!,;:]|$)", re.IGNORECASE)
_NOT_EVENTS = frozenset({"last", "next", "that", "this", "it", "then", "now"}) | _DAY_WORDS
_LANGUAGES = ["en"]


@dataclass(frozen=True)
class TimeWindow:
    phrase: str
    start: datetime  # inclusive, UTC
    end: datetime  # exclusive, UTC
    period: str  # day | weekend | week | month | year


def _settings(now: datetime, prefer: str = "past") -> dict[str, object]:
    return {"PREFER_DATES_FROM": prefer, "RELATIVE_BASE": now.astimezone(UTC).replace(tzinfo=None),
            "RETURN_AS_TIMEZONE_AWARE": True, "TIMEZONE": "UTC", "TO_TIMEZONE": "UTC"}


def _plausible(phrase: str, query: str) -> bool:
    words = phrase.split()
    if any(ch.isdigit() for ch in phrase) or len(words) > 1:
        return True
    word = words[0] if words else ""
    if word.casefold() in _DAY_WORDS:
        return True
    return word[:1].isupper() and not query.lstrip().startswith(word)


def _window(moment: datetime, period: str) -> tuple[datetime, datetime]:
    moment = moment.astimezone(UTC)
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "year":
        start = day.replace(month=1, day=1)
        return start, start.replace(year=start.year + 1)
    if period == "month":
        start = day.replace(day=1)
        return start, (start + timedelta(days=32)).replace(day=1)
    if period == "week":
        return day - timedelta(days=3), day + timedelta(days=4)
    return day, day + timedelta(days=1)


@dataclass(frozen=True)
class EventRelation:
    phrase: str  # as written in the query
    period: str  # day | weekend | week | month | year
    days: int  # the window's length in days
    before: bool  # the period before the event (else after it)
    event: str  # the event's words ("concert", "sister's wedding")


def find_event_relation(query: str) -> EventRelation | None:
    """A time the query names relative to an event, or None."""
    match = _EVENT_RELATION.search(query)
    if match is None or match["event"].split()[0].casefold() in _NOT_EVENTS:
        return None
    period = match["period"].casefold()
    count = int(match["count"]) if match["count"] else 1
    return EventRelation(phrase=match.group(0).strip(), period=period, days=_PERIOD_DAYS[period] * max(1, count),
                         before=match["direction"].casefold() == "before", event=match["event"].strip())


def event_window(relation: EventRelation, occurred_at: datetime) -> TimeWindow:
    """The window `relation` names, for an event on the day of `occurred_at`: the period up to that day, or from
    the day after it."""
    day = occurred_at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    span = timedelta(days=relation.days)
    start, end = (day - span, day) if relation.before else (day + timedelta(days=1), day + timedelta(days=1) + span)
    return TimeWindow(phrase=relation.phrase, start=start, end=end, period=relation.period)


class _Timeless:
    """The (query, UTC day) pairs found to name no time, most recent last (bounded). Whether dateparser finds a
    phrase does not depend on the time of day, so within a day the answer is the same; a phrase that is found
    is resolved every time (its window moves with `now`). dateparser is pure Python and slow enough per query for
    this cache to matter."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._seen: OrderedDict[tuple[str, date], None] = OrderedDict()

    def __contains__(self, key: tuple[str, date]) -> bool:
        try:
            self._seen.move_to_end(key)
        except KeyError:
            return False
        return True

    def add(self, key: tuple[str, date]) -> None:
        self._seen[key] = None
        while len(self._seen) > self._size:
            self._seen.popitem(last=False)


_TIMELESS = _Timeless(4096)


# A message worth handing to dateparser at write time: it names a time relative to when it was said (or a day).
_RELATIVE_CUE = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|ago|last|next|this\s+(?:week|weekend|month|year|morning|evening)"
    r"|weekend|(?:mon|tues|wednes|thurs|fri|satur|sun)day)\b", re.IGNORECASE)


# Tense, for a time that could lie either way ("on Friday", "in June"). A plan speaks of the future ("we're meeting
# on Friday", "I'll call on Monday", "I have an appointment on Friday"); a report of the past ("we went hiking on
# Saturday", "the party was on Friday"). Words like "booked" or "scheduled" are past participles of a plan.
_FUTURE = re.compile(
    r"\b(?:will|'ll|shall|going to|gonna|about to|plan(?:ning)? to|planned|scheduled|booked|due|upcoming|coming|"
    r"next|tomorrow|tonight|soon|later|(?:am|is|are|'m|'re|'s)\s+(?:(?:i|we|you|he|she|they)\s+)?(?:\w+ly\s+)?(?!going\b)\w+ing)\b",
    re.IGNORECASE)
_PAST = re.compile(
    r"\b(?:was|were|did|didn't|had|went|got|ran|met|saw|came|left|took|made|ate|drank|bought|found|gave|told|said|"
    r"spent|flew|won|lost|began|wrote|sang|swam|drove|rode|sold|paid|kept|felt|heard|thought|brought|caught|"
    r"last|ago|yesterday|earlier|already|(?!(?:need|bored|tired|excited|interested|married|based|supposed|"
    r"expected|invited|scheduled|planned|booked)\b)[a-z]{2,}ed)\b",
    re.IGNORECASE)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY_PHRASE = re.compile(
    r"\b(?:(?P<mod>last|next|this coming|this|coming|on|this past|past)\s+)?"
    r"(?P<day>monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b(?!s\b|'s)", re.IGNORECASE)


def tense(text: str, default: str = "future") -> str:
    """"future" or "past": which way a time named without a direction ("on Friday") lies from when `text` was
    said. A plan (future words: "will", "are meeting", "next", "booked") looks forward, a report (past words:
    "went", "was", "-ed") backward; with neither, `default` (a statement with a weekday is usually a plan; a search
    query asks about what happened)."""
    future, past = _FUTURE.search(text), _PAST.search(text)
    if future and not past:
        return "future"
    if past and not future:
        return "past"
    if future and past:
        return "future" if future.start() < past.start() and default == "future" else "past"
    return default


def _weekday(text: str, said_at: datetime, direction: str) -> TimeWindow | None:
    """A weekday the text names ("on Friday", "last Saturday", "next Monday") as the day it means from `said_at`:
    "last"/"past" the latest one before the day it was said, "next"/"coming" the first one after it, else the
    first one after it for a plan or the latest one before it for a report (`direction`). dateparser reads "next
    Friday" as "Friday" and resolves a bare weekday one way only."""
    match = _WEEKDAY_PHRASE.search(text)
    if match is None:
        return None
    mod = (match["mod"] or "").casefold()
    backward = mod in ("last", "past", "this past") or (mod not in ("next", "coming", "this coming")
                                                          and direction == "past")
    day = said_at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    wanted = _WEEKDAYS.index(match["day"].casefold())
    offset = (day.weekday() - wanted) % 7 or 7 if backward else (wanted - day.weekday()) % 7 or 7
    start = day - timedelta(days=offset) if backward else day + timedelta(days=offset)
    return TimeWindow(phrase=match.group(0), start=start, end=start + timedelta(days=1), period="day")


_WEEKEND_PHRASE = re.compile(r"\b(?:(?P<mod>last|next|this coming|this past|this|coming|past)\s+)?weekend\b",
                             re.IGNORECASE)
_SAME_DAY = re.compile(r"\b(?:today|tonight|this (?:morning|afternoon|evening)|earlier today)\b", re.IGNORECASE)


def _weekend(text: str, said_at: datetime, direction: str) -> TimeWindow | None:
    """A weekend the text names ("last weekend", "this weekend", "at the weekend") as its Saturday and Sunday:
    "last"/"past" the latest one that began before the day it was said, "this"/"next"/"coming" the one under way or
    the first one after it, a bare "weekend" by `direction`."""
    match = _WEEKEND_PHRASE.search(text)
    if match is None:
        return None
    mod = (match["mod"] or "").casefold()
    day = said_at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    backward = mod in ("last", "past", "this past") or (not mod and direction == "past")
    if backward:
        saturday = day - timedelta(days=(day.weekday() - 5) % 7 or 7)
    else:  # the weekend under way, else the coming one
        saturday = day - timedelta(days=day.weekday() - 5) if day.weekday() >= 5 else day + timedelta(
            days=5 - day.weekday())
    return TimeWindow(phrase=match.group(0), start=saturday, end=saturday + timedelta(days=2), period="weekend")


def _same_day(text: str, said_at: datetime) -> TimeWindow | None:
    """"today", "tonight", "this morning": the day it was said."""
    match = _SAME_DAY.search(text)
    if match is None:
        return None
    day = said_at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return TimeWindow(phrase=match.group(0), start=day, end=day + timedelta(days=1), period="day")


def anchor(text: str, said_at: datetime) -> TimeWindow | None:
    """The time a message names relative to when it was said ("yesterday", "last Saturday", "two weeks ago",
    "on Friday", "next week"), resolved against `said_at` (its session's date): session-level time anchoring at
    write time. A weekday or a time without a direction resolves forward in a plan ("Tom and I are meeting on
    Friday" said on Monday 30 November: Friday 4 December) and backward in a report ("we went hiking on Saturday":
    Saturday 28 November), `tense`. None when it names no relative time (checked by a cheap pattern before
    dateparser runs)."""
    if not _RELATIVE_CUE.search(text):
        return None
    direction = tense(text)
    return (_weekday(text, said_at, direction) or _weekend(text, said_at, direction) or _same_day(text, said_at)
            or _find(text, said_at, direction))


def find_time_window(query: str, now: datetime | None = None) -> TimeWindow | None:
    """The first time phrase of `query` as a window, or None when it names no time. A weekday resolves backward
    unless the query speaks of a plan ("what am I doing on Friday?", "next Friday"), `tense`."""
    now = now or datetime.now(UTC)
    key = (query, now.astimezone(UTC).date())
    if key in _TIMELESS:
        return None
    direction = tense(query, default="past")
    window = _weekday(query, now, direction) or _weekend(query, now, direction) or _find(query, now, direction)
    if window is None:
        _TIMELESS.add(key)
    return window


def _find(query: str, now: datetime, prefer: str = "past") -> TimeWindow | None:
    # Imported here: dateparser takes ~0.6 s to import, which every CLI command paid (service.client imports the
    # search schemas, which import this module) without ever parsing a date. The service pays it at its warm-up search.
    from dateparser.date import DateDataParser
    from dateparser.search import search_dates

    settings = _settings(now, prefer)
    found = search_dates(query, languages=_LANGUAGES, settings=settings) or []
    parser = DateDataParser(languages=_LANGUAGES, settings=settings)
    for phrase, moment in found:
        phrase = phrase.strip()
        if not _plausible(phrase, query):
            continue
        period = parser.get_date_data(phrase).period or "day"
        start, end = _window(moment, period)
        return TimeWindow(phrase=phrase, start=start, end=end, period=period)
    return None
