"""Preferences with a scope and a history (docs/preferences.md).

A preference memory may carry a `kind` (e.g. `budget`, given by the write; never guessed from the content) and
`applies_to` (entity names: a project's tool, a person). Its *slot* is (user, kind, scope, project, applies_to
set): a newer preference in the same slot supersedes the older one. Both are kept; the older one gets
`superseded_by`/`superseded_at`, and listings, search and the context hide it unless asked for history.

"Newer" is the acceptance order (`created_at`, then the task id), and within one job the later memory: every job
that runs marks all but the newest active memory of a slot, so the result does not depend on the order jobs run
in. An explicit correction in a conversation ("actually, make that 80 dollars") is understood without an LLM:
it revises the amount of the latest preference that has one, in the same conversation or stored earlier, and
supersedes that very preference (with or without a kind).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from service.core.domain import Memory, Message, content_hash
from service.core.errors import DomainError

PREFERENCE = "preference"

Slot = tuple[str, str, str, str | None, tuple[str, ...]]

# An amount of money: "$80", "80 dollars", "80 USD", "€80", "80 euros".
_CURRENCY_WORDS = r"(?:dollars?|bucks|usd|euros?|eur|pounds?|gbp|francs?|chf)"
MONEY = re.compile(
    rf"(?:[$€£]\s?\d[\d,]*(?:\.\d+)?(?:\s?[kK]\b)?|\b\d[\d,]*(?:\.\d+)?\s?(?:[kK]\s?)?{_CURRENCY_WORDS}\b)",
    re.IGNORECASE,
)
# "Actually, make that 80 dollars", "no, make it $80 instead", "correction: change that to 80 dollars".
CORRECTION = re.compile(
    r"^\s*(?:(?:actually|no|sorry|wait|oops|correction|hmm)\b[\s,:;!.-]*)*"
    r"(?:please\s+)?(?:make\s+(?:that|it)|change\s+(?:that|it)\s+to|let'?s\s+(?:say|make\s+it)|"
    r"(?:it|that)\s+should\s+be)\s+(?P<value>.+?)(?:\s+instead)?\s*[.!]*\s*$",
    re.IGNORECASE,
)


def preference_scope(category: str, kind: str | None, applies_to: Iterable[str]) -> tuple[str | None, list[str]]:
    """A write's kind and applies_to as stored (kind lower-cased; names trimmed, repeats dropped). Only a
    preference has them."""
    names = list(dict.fromkeys(n.strip() for n in applies_to if n.strip()))
    if (kind is not None or names) and category != PREFERENCE:
        raise DomainError(f"kind and applies_to are for category '{PREFERENCE}', not '{category}'")
    return (kind.strip().lower() if kind is not None else None), names


def slot(m: Memory) -> Slot | None:
    """Which preferences compete with this one; None for a memory no other can supersede."""
    if m.category != PREFERENCE or not m.kind:
        return None
    return (m.user_id, m.kind, m.scope.value, m.project_id, tuple(sorted({a.casefold() for a in m.applies_to})))


def newness(m: Memory) -> tuple[str, str]:
    return (m.created_at, m.task_id or "")


def within_job(memories: list[Memory], at: str) -> list[Memory]:
    """One job's memories with each earlier preference of a slot marked superseded by the job's last one."""
    last: dict[Slot, str] = {}
    for m in memories:
        key = slot(m)
        if key is not None and m.superseded_by is None:
            last[key] = m.id
    out = []
    for m in memories:
        key = slot(m)
        if key is not None and m.superseded_by is None and last[key] != m.id:
            m = m.model_copy(update={"superseded_by": last[key], "superseded_at": at})
        out.append(m)
    return out


def to_supersede(active: list[Memory]) -> list[tuple[Memory, str]]:
    """Among active preferences (any slots), each that is not the newest of its slot, with the newest's id."""
    newest: dict[Slot, Memory] = {}
    for m in active:
        key = slot(m)
        if key is not None and (key not in newest or newness(m) > newness(newest[key])):
            newest[key] = m
    out = []
    for m in active:
        key = slot(m)
        if key is not None and newest[key].id != m.id:
            out.append((m, newest[key].id))
    return out


def correction_value(text: str) -> str | None:
    """The amount an explicit correction sets ("actually, make that 80 dollars" -> "80 dollars"); None when the
    sentence is not one, or sets something other than an amount."""
    for sentence in re.split(r"(?<=[.!?])\s+", text.strip()):
        found = CORRECTION.match(sentence)
        if found:
            amount = MONEY.search(found.group("value"))
            if amount:
                return amount.group(0)
    return None


def corrected(earlier: Memory, amount: str, *, id: str, task_id: str, at: str, occurred_at: str,
              source: list[str]) -> Memory | None:
    """The earlier preference with its amount replaced: same kind, applies_to and scope (it then supersedes the
    earlier one). None when the earlier one states no amount."""
    found = MONEY.search(earlier.content)
    if found is None:
        return None
    content = earlier.content[: found.start()] + amount + earlier.content[found.end():]
    return earlier.model_copy(update={
        "id": id, "content": content, "hash": content_hash(content), "created_at": at, "updated_at": at,
        "task_id": task_id, "occurred_at": occurred_at, "source_message_ids": source, "superseded_by": None,
        "superseded_at": None, "stored_at": None,
    })


def corrections(messages: list[Message]) -> list[tuple[int, str]]:
    """(message index, amount) of each user message that corrects an amount."""
    out = []
    for i, msg in enumerate(messages):
        if msg.role == "user":
            value = correction_value(msg.content)
            if value is not None:
                out.append((i, value))
    return out
