"""What a conversation stores beside its facts: its messages, verbatim, grouped into interaction windows
(the conversation path passes no `covered` messages: every message is kept), and the helpers that map
messages to source ids and times (docs/decisions.md, "Conversations keep what was said")."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import dateparser

from service.core.domain import Message, iso
from service.text.timephrases import anchor

WINDOW_MESSAGES = 2  # at most this many messages in one interaction window (INTERACTION_WINDOW_MESSAGES): a turn
WINDOW_CHARS = 1200  # and at most this many characters of "<role>: <text>" lines (one message may exceed it)


@dataclass(frozen=True)
class Window:
    """Consecutive messages stored verbatim as one `interaction` memory."""

    indexes: tuple[int, ...]
    content: str


def source_id(index: int, message: Message) -> str:
    """How a memory names a message it came from: the message's id, else its 0-based index."""
    return message.id if message.id is not None else str(index)


def source_ids(indexes: Iterable[int], messages: Sequence[Message]) -> list[str]:
    """Source ids of the given message indexes, in message order, each once."""
    return [source_id(i, messages[i]) for i in sorted(set(indexes))]


def valid_indexes(indexes: Iterable[int], count: int) -> list[int]:
    """The indexes that point at one of `count` messages (others are dropped), sorted, each once."""
    return sorted({i for i in indexes if 0 <= i < count})


def line(message: Message) -> str:
    """A message as a window line: the speaker, then the text."""
    return f"{message.role}: {message.content.strip()}"


# "<Name>: text": a transcript line that names its speaker (one to three capitalised words, then a colon)
_SPEAKER_LABEL = re.compile(r"^\s*([A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2}):\s+\S")


def speaker_label(text: str) -> str | None:
    """The speaker a transcript line names first ("Caroline: I went ..." -> "caroline"), or None."""
    label = _SPEAKER_LABEL.match(text)
    return label.group(1).casefold() if label else None


def without_label(text: str) -> str:
    """A transcript line's text without its speaker label."""
    label = _SPEAKER_LABEL.match(text)
    return text[label.end(1) + 1:].strip() if label else text.strip()


def speaker(message: Message) -> str:
    """Who said a message: its role, and the speaker its text names first when it is a transcript line ("user" for
    both people of an imported chat, told apart by "Caroline: ..." / "Melanie: ...")."""
    label = speaker_label(message.content)
    return f"{message.role}\x1f{label}" if label else message.role


def interaction_windows(
    messages: Sequence[Message],
    covered: Iterable[int],
    max_messages: int = WINDOW_MESSAGES,
    max_chars: int = WINDOW_CHARS,
) -> list[Window]:
    """Group the messages with content whose index is not in `covered` (no fact came from them) into
    windows that follow the turn: a message and the replies to it, at most `max_messages` messages and
    `max_chars` characters, never across a covered message. A window never holds two messages of one speaker (two
    things the user said in a row are two windows: each keeps to its topic), and a user's message opens a window of
    its own after an assistant's (the assistant's message answered the message before it). A message longer than
    `max_chars` is a window of its own, kept whole."""
    skip = set(covered)
    windows: list[Window] = []
    current: list[int] = []
    size = 0

    def flush() -> None:
        nonlocal current, size
        if current:
            windows.append(Window(tuple(current), "\n".join(line(messages[i]) for i in current)))
        current, size = [], 0

    for index, message in enumerate(messages):
        if index in skip:
            flush()
            continue
        if not message.content.strip():
            continue  # nothing was said
        length = len(line(message)) + (1 if current else 0)
        who = speaker(message)
        if current and (len(current) >= max_messages or size + length > max_chars
                        or any(speaker(messages[i]) == who for i in current)
                        or (message.role == "user" and messages[current[0]].role == "assistant")):
            flush()
            length -= 1
        current.append(index)
        size += length
    flush()
    return windows


def parse_timestamp(value: str | None, accepted_at: str) -> str | None:
    """A message timestamp in the stored form (UTC ISO 8601), or None when it is missing or does not parse.

    ISO 8601 first; then `dateparser` (English, e.g. "March 2, 2024 3pm", "Tue, 02 Mar 2024 10:00 +0100",
    epoch seconds), with relative phrases ("yesterday 5pm") taken from the acceptance time so a replay
    parses the same. A time without a zone is UTC."""
    if not value or not value.strip():
        return None
    text = value.strip()
    try:
        return iso(datetime.fromisoformat(text))
    except ValueError:
        pass
    base = datetime.fromisoformat(accepted_at) if accepted_at else None
    settings: dict[str, object] = {"TIMEZONE": "UTC", "TO_TIMEZONE": "UTC", "RETURN_AS_TIMEZONE_AWARE": True}
    if base is not None:
        settings["RELATIVE_BASE"] = base.replace(tzinfo=None)
    parsed = dateparser.parse(text, languages=["en"], settings=settings)
    return iso(parsed) if isinstance(parsed, datetime) else None


@dataclass(frozen=True)
class EventTime:
    """A time the messages name relative to when they were said: when it was said, and the day it names (in the
    past for a report, in the future for a plan; timephrases.anchor)."""

    said_at: str
    event_at: str

    @property
    def occurred_at(self) -> str:
        """What happened by the time it was said: the day named when it lies before (the event happened then), else
        the moment it was said (a plan is made when it is said; its day is `event_at`)."""
        return min(self.said_at, self.event_at, key=datetime.fromisoformat)

    def metadata(self) -> dict[str, str]:
        return {"said_at": self.said_at, "event_at": self.event_at}


def event_time(indexes: Iterable[int], messages: Sequence[Message], accepted_at: str) -> EventTime | None:
    """The time that the first of these messages with a timestamp and a relative time phrase names, resolved against
    that timestamp ("I went there yesterday" said on 8 May: 7 May; "we're meeting on Friday" said on Monday
    30 November: Friday 4 December); None when none names one."""
    for i in sorted(set(indexes)):
        said = parse_timestamp(messages[i].timestamp, accepted_at)
        if said is not None and (named := anchor(messages[i].content, datetime.fromisoformat(said))) is not None:
            # a week is centred on the day named ("two weeks ago"); a month or a year starts the period
            return EventTime(said, iso(named.start + timedelta(days=3) if named.period == "week" else named.start))
    return None


def anchored_time(indexes: Iterable[int], messages: Sequence[Message], accepted_at: str) -> str:
    """When what these messages say happened (TIME_ANCHORING, docs/retrieval.md): the day a relative time phrase of
    theirs names when it lies in the past ("I went there yesterday" said on 8 May: 7 May); the time it was said
    when the phrase names a later day (a plan: its day is the memory's `event_at`, `event_time`); else
    `first_time`."""
    named = event_time(indexes, messages, accepted_at)
    return named.occurred_at if named is not None else first_time(indexes, messages, accepted_at)


def first_time(indexes: Iterable[int], messages: Sequence[Message], accepted_at: str) -> str:
    """When the first of these messages with a parseable timestamp was said, else the acceptance time."""
    for i in sorted(set(indexes)):
        moment = parse_timestamp(messages[i].timestamp, accepted_at)
        if moment is not None:
            return moment
    return accepted_at
