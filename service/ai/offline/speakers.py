"""Transcript lines of the offline link finder: "<Speaker>: <text>" is said by Speaker.

Chat logs, meeting notes and imported conversations are stored as lines that start with who said them
("Marta: I moved to Oslo", or a conversation window's "user: Marta: ..."). Such a line is about its speaker
as much as about anything it names: the speaker is a person the memory mentions, and the line's first person
is the speaker. Only the shape of the line counts (one to three capitalised words, then a colon and the
text); labels that are not people ("Note:", "TODO:", "Step:", a technology) are not speakers."""

from __future__ import annotations

import re

from service.ai.extraction import ExtractedRelation
from service.ai.offline.lexicon import lookup
from service.ai.offline.text import USER_ENTITY

MAX_SPEAKER_CHARS = 40
# An optional conversation role first (a window line is "<role>: <message>"), then the speaker label.
_LINE = re.compile(
    r"^[ \t]*(?:(?:user|assistant|system|tool|human|ai):[ \t]+)?"
    r"(?P<name>[A-Z][A-Za-z'.-]*(?: [A-Z][A-Za-z'.-]*){0,2}):[ \t]+(?P<body>\S.*)$"
)
# Labels a line starts with that name no person (compared casefolded).
_NOT_SPEAKERS = frozenset({
    "note", "notes", "nb", "update", "updates", "todo", "to do", "fixme", "warning", "error", "errors", "info", "debug",
    "summary", "tl;dr", "tldr", "question", "answer", "q", "a", "re", "fyi", "ps", "p.s", "edit", "important",
    "tip", "hint", "example", "examples", "step", "reminder", "title", "subject", "topic", "date", "time", "status",
    "result", "results", "output", "input", "user", "assistant", "system", "human", "ai", "bot", "me", "i", "we",
    "goal", "goals", "decision", "context", "reason", "why", "how", "what", "when", "where", "who", "problem",
    "solution", "issue", "bug", "fix", "cause", "action", "actions", "next", "done", "agenda", "location", "source",
    "see", "also", "caution", "attention", "announcement", "breaking", "changelog", "description", "details",
})


def speaker_of(label: str) -> str | None:
    """The speaker a line label names, or None when the label is not a person's name."""
    name = label.strip()
    if not name or len(name) > MAX_SPEAKER_CHARS or name.casefold().rstrip(".") in _NOT_SPEAKERS:
        return None
    if lookup(name) is not None:  # "Python: ...", "Postgres: ..." are about a technology
        return None
    return name


def speaker_lines(text: str) -> list[tuple[str | None, str]] | None:
    """The text as (speaker or None, line body) per non-empty line, or None when no line has a speaker."""
    out: list[tuple[str | None, str]] = []
    any_speaker = False
    for raw in text.splitlines():
        if not raw.strip():
            continue
        match = _LINE.match(raw)
        speaker = speaker_of(match.group("name")) if match else None
        if speaker is not None and match is not None:
            any_speaker = True
            out.append((speaker, match.group("body").strip()))
        else:
            out.append((None, raw.strip()))
    return out if any_speaker else None


def as_speaker(relation: ExtractedRelation, speaker: str) -> ExtractedRelation:
    """A relation of a speaker's line with the line's first person ("user") read as the speaker."""
    return relation.model_copy(update={
        "subject": speaker if relation.subject == USER_ENTITY else relation.subject,
        "object": speaker if relation.object == USER_ENTITY else relation.object,
    })
