"""The offline extractor: deterministic rules, no network, no model (see docs/offline-extractor.md).

Only the user's turns are read; assistant, system and tool turns are context, never facts about
the user. Each user turn is cut into sentences and then into independent first-person clauses
("My name is Priya and I work at Stripe" gives two). A clause is kept when an ordered category
rule fires on it - that is the salience test - and dropped when it is a question, a greeting or
thanks, a bare request to the assistant, or shorter than three words.

A fact's ``content`` is the clause itself, trimmed of leading filler, so nothing the user said is
paraphrased away. Entities come from the technology lexicon (``service.ai.offline.lexicon``),
capitalised names inside the sentence, backticked and quoted names. Relations use a small set of
snake_case predicates with "user" (first person singular) or the project as subject."""

from __future__ import annotations

import re
from collections.abc import Sequence

from service.ai.extraction import (
    ExtractedEntity,
    ExtractedFact,
    ExtractedRelation,
    ExtractionResult,
    KnownMemory,
    Message,
    TokenUsage,
)
from service.ai.offline.classify import GLOBAL_SCOPE, classify
from service.ai.offline.mentions import NON_TECH_TYPES, Mention, find_mentions
from service.ai.offline.relations import find_date, find_relations
from service.ai.offline.speakers import as_speaker, speaker_lines
from service.ai.offline.text import (
    MAX_ENTITIES,
    MAX_RELATIONS,
    USER_ENTITY,
    clean_clause,
    is_noise,
    join_leaning,
    split_clauses,
    split_sentences,
)
from service.core.domain import Scope

# "it's a Flask app" after a clause that named a project: the project is the subject
_IT = re.compile(r"^(?:it's|it is|it\u2019s)\s+", re.IGNORECASE)


class OfflineExtractor:
    """Rule-based extractor behind the Extractor Protocol: deterministic, no I/O, no model."""

    name = "offline"
    names_replacements = False  # the write path's rules name what a change replaces (service/memory/changes.py)

    def __init__(self, max_facts: int = 64) -> None:
        self.max_facts = max_facts

    async def extract(self, messages: list[Message], project_id: str | None = None,
                      known: Sequence[KnownMemory] = ()) -> ExtractionResult:
        return ExtractionResult(facts=self.extract_sync(messages, project_id), extractor=self.name, usage=TokenUsage())

    def extract_sync(self, messages: list[Message], project_id: str | None = None) -> list[ExtractedFact]:
        """Each fact's `source_messages` is the index of the user message it came from; a clause
        repeated in a later message adds that message's index to the first fact instead of a new fact."""
        facts: list[ExtractedFact] = []
        seen: dict[str, ExtractedFact] = {}
        for index, message in enumerate(messages):
            if message.role != "user":
                continue
            named: str | None = None  # the project the message last named: what a following "it's ..." is
            for sentence in join_leaning(split_sentences(message.content)):
                for clause in split_clauses(sentence):
                    text = clean_clause(clause)
                    if named is not None:
                        text = _IT.sub(f"{named} is ", text, count=1)
                    named = next((m.name for m in find_mentions(text) if m.type == "project"), named)
                    fact = self.fact_of(text, project_id)
                    if fact is None:
                        continue
                    key = " ".join(fact.content.split()).casefold().rstrip(".!")
                    first = seen.get(key)
                    if first is not None:
                        if index not in first.source_messages:
                            first.source_messages.append(index)
                        continue
                    fact.source_messages.append(index)
                    seen[key] = fact
                    facts.append(fact)
                    if len(facts) >= self.max_facts:
                        return facts
        return facts

    @staticmethod
    def fact_of(text: str, project_id: str | None) -> ExtractedFact | None:
        """The fact one clean clause states, or None when it states none."""
        if is_noise(text):
            return None
        mentions = find_mentions(text)
        category = classify(text, any(m.tech and m.type not in NON_TECH_TYPES for m in mentions), project_id)
        if category is None:
            return None
        relations = find_relations(text, category, mentions, project_id)
        entities = _entities(mentions, relations)
        return ExtractedFact(
            content=text[:2000],
            category=category,
            scope=Scope.GLOBAL if GLOBAL_SCOPE.search(text) else None,
            entities=entities[:MAX_ENTITIES],
            relations=relations,
            valid_at=find_date(text),
        )


def graph_links(
    text: str, category: str, project_id: str | None
) -> tuple[list[ExtractedEntity], list[ExtractedRelation]]:
    """Entities and relations of one already-categorised statement (raw writes, updates).

    Raw writes skip the LLM by design (the client categorised them); their graph side still comes from these rules.
    A transcript line ("<Speaker>: <text>", service.ai.offline.speakers) is by its speaker: the speaker is a
    person the memory mentions, and the line's first person ("I", "my") is the speaker, not the user.
    """
    lines = speaker_lines(text)
    if lines is None:
        mentions = find_mentions(text)
        relations = find_relations(text, category, mentions, project_id)
        return _entities(mentions, relations), relations
    entities: list[ExtractedEntity] = []
    relations = []
    for speaker, body in lines:
        mentions = find_mentions(body)
        found = find_relations(body, category, mentions, project_id)
        if speaker is not None:
            mentions = [Mention(0, 0, speaker, "person", tech=False),
                        *(m for m in mentions if m.name.casefold() != speaker.casefold())]
            found = [as_speaker(r, speaker) for r in found]
        entities += [e for e in _entities(mentions, found) if e not in entities]
        relations += [r for r in found if r not in relations]
    return entities[:MAX_ENTITIES], relations[:MAX_RELATIONS]


def _entities(mentions: list[Mention], relations: list[ExtractedRelation]) -> list[ExtractedEntity]:
    """The mentions, plus every relation endpoint that is not one: the user, the project, or a
    setting value such as "4 spaces"."""
    entities = [ExtractedEntity(name=m.name, type=m.type) for m in mentions]
    known = {m.name for m in mentions}
    subjects = {r.subject for r in relations}
    for name in sorted(({r.subject for r in relations} | {r.object for r in relations}) - known):
        kind = "person" if name == USER_ENTITY else "project" if name in subjects else "setting"
        entities.append(ExtractedEntity(name=name, type=kind))
    return entities[:MAX_ENTITIES]


class RuleLinkFinder:
    """The LinkFinder of the offline rules (graph_links)."""

    name = "rules"

    def find(
        self, content: str, category: str, project_id: str | None
    ) -> tuple[list[ExtractedEntity], list[ExtractedRelation]]:
        return graph_links(content, category, project_id)

