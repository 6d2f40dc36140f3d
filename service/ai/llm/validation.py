"""What every LLM provider does with an answer: windows of a long conversation, one returned item checked against
`service.ai.extraction.ExtractedFact` (a bad item is dropped and counted, never stored), the facts of several
windows merged. Shared by Gemini (service/ai/gemini/extractor.py) and OpenAI-compatible servers
(service/ai/openai/extractor.py), so both store the same facts for the same answer."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

import structlog
from pydantic import ValidationError

from service.ai.extraction import ExtractedEntity, ExtractedFact, ExtractedRelation, Message
from service.ai.llm.prompts import render_message
from service.core.domain import normalise

log = structlog.get_logger(__name__)

MAX_ITEMS_PER_FACT = 32  # ExtractedFact.entities / relations max_length

_PREDICATE_JUNK = re.compile(r"[^a-z0-9]+")


def snake(predicate: str) -> str:
    return _PREDICATE_JUNK.sub("_", predicate.strip().casefold()).strip("_")


def iso_or_none(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or text.casefold() in {"null", "none", "unknown", "n/a"}:
        return None
    try:
        if len(text) == 10:
            date.fromisoformat(text)
        else:
            datetime.fromisoformat(text)
    except ValueError:
        return None
    return text


def windows(messages: Sequence[Message], window_chars: int) -> list[tuple[int, list[Message]]]:
    """Whole messages packed into windows of at most `window_chars` rendered characters.

    Returns (index of the first message, messages). A single message longer than a window
    gets a window of its own and is cut when rendered.
    """
    out: list[tuple[int, list[Message]]] = []
    current: list[Message] = []
    start = 0
    size = 0
    for index, message in enumerate(messages):
        length = min(len(render_message(index, message)), window_chars) + 1
        if current and size + length > window_chars:
            out.append((start, current))
            current, size, start = [], 0, index
        current.append(message)
        size += length
    if current:
        out.append((start, current))
    return out


class FactCollector:
    """The facts of every window of one conversation, each (content, category) once: the same fact from another
    window adds that window's source messages to the first one."""

    def __init__(self) -> None:
        self.facts: list[ExtractedFact] = []
        self._seen: dict[tuple[str, str], ExtractedFact] = {}

    def add(self, fact: ExtractedFact) -> None:
        key = (normalise(fact.content), fact.category)
        first = self._seen.get(key)
        if first is None:
            self._seen[key] = fact
            self.facts.append(fact)
        else:
            first.source_messages[:] = sorted({*first.source_messages, *fact.source_messages})


def validate_item(
    item: Any, project_id: str | None, model: str, shown: range | None = None, *, provider: str = "gemini",
    errors: list[str] | None = None,
) -> tuple[ExtractedFact | None, int]:
    """One returned item -> (fact or None, number of dropped items incl. nested ones).

    `shown`: the message indexes the model saw; a `source_messages` entry outside it (or not an
    integer) is dropped without counting, and a fact may end with none. `provider` prefixes the log events;
    `errors` collects why an item was dropped (what a repair request shows the model)."""
    if not isinstance(item, dict):
        if errors is not None:
            errors.append(f"a fact must be a JSON object, got {type(item).__name__}")
        log.warning(f"{provider}_item_dropped", model=model, reason="not an object", item=repr(item)[:200])
        return None, 1
    dropped = 0
    entities: list[ExtractedEntity] = []
    names: set[str] = set()
    for raw in as_list(item.get("entities")):
        try:
            entity = ExtractedEntity.model_validate(raw)
        except ValidationError as exc:
            dropped += 1
            log.warning(f"{provider}_entity_dropped", model=model, error=short_error(exc), item=repr(raw)[:200])
            continue
        if entity.name.casefold() not in names:
            names.add(entity.name.casefold())
            entities.append(entity)
    relations: list[ExtractedRelation] = []
    for raw in as_list(item.get("relations")):
        candidate = dict(raw) if isinstance(raw, dict) else raw
        if isinstance(candidate, dict) and isinstance(candidate.get("predicate"), str):
            candidate["predicate"] = snake(candidate["predicate"])
        try:
            relation = ExtractedRelation.model_validate(candidate)
        except ValidationError as exc:
            dropped += 1
            log.warning(f"{provider}_relation_dropped", model=model, error=short_error(exc), item=repr(raw)[:200])
            continue
        relations.append(relation)
        for endpoint in (relation.subject, relation.object):  # every endpoint is an entity
            if endpoint.casefold() not in names:
                names.add(endpoint.casefold())
                kind = "person" if endpoint.casefold() == "user" else "thing"
                entities.append(ExtractedEntity(name=endpoint, type=kind))
    dropped += max(0, len(relations) - MAX_ITEMS_PER_FACT)  # extra entities are trimmed silently
    entities, relations = entities[:MAX_ITEMS_PER_FACT], relations[:MAX_ITEMS_PER_FACT]

    category = item.get("category")
    scope = item.get("scope")
    if isinstance(scope, str):
        scope = scope.strip().casefold() or None
    if scope not in (None, "global", "project"):
        scope = None
    if scope == "project" and not project_id:
        scope = "global"  # no project to attach it to
    content = item.get("content")
    candidate_fact = {
        "content": content.strip() if isinstance(content, str) else content,
        "category": category.strip().casefold() if isinstance(category, str) else category,
        "scope": scope,
        "entities": entities,
        "relations": relations,
        "valid_at": iso_or_none(item.get("valid_at")),
        "source_messages": indexes(item.get("source_messages"), shown),
        "replaces": [str(x).strip().strip("[]") for x in as_list(item.get("replaces"))
                     if isinstance(x, (str, int))][:16],  # labels here; resolve_replaces makes them ids
    }
    try:
        fact = ExtractedFact.model_validate(candidate_fact)
    except ValidationError as exc:
        if errors is not None:
            errors.append(f"fact {str(content)[:80]!r}: {short_error(exc)}")
        log.warning(
            f"{provider}_item_dropped",
            model=model,
            error=short_error(exc),
            category=str(category)[:64],
            content=str(item.get("content"))[:200],
        )
        return None, dropped + 1
    return fact, dropped


def resolve_replaces(facts: Sequence[ExtractedFact], labels: dict[str, str], *, provider: str, model: str) -> None:
    """Each fact's `replaces` from the labels the model named to the ids of the known memories they label (in
    place). A label that was not shown (an invented one, another user's memory id, anything else) is logged and
    ignored: only what the prompt showed can be replaced."""
    for fact in facts:
        named = fact.replaces
        fact.replaces = list(dict.fromkeys(labels[n] for n in named if n in labels))
        unknown = [n for n in named if n not in labels]
        if unknown:
            log.warning(f"{provider}_replaces_unknown", model=model, labels=unknown[:5], shown=len(labels))


def indexes(value: Any, shown: range | None) -> list[int]:
    """The valid message indexes of a `source_messages` answer, sorted, each once."""
    found: set[int] = set()
    for raw in as_list(value):
        if isinstance(raw, str) and raw.strip().isdigit():
            raw = int(raw.strip())
        if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0 and (shown is None or raw in shown):
            found.add(raw)
    return sorted(found)


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def short_error(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
