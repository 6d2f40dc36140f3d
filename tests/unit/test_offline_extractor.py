"""Offline extractor: focused behaviour tests and a quality measurement on the gold set.

Run with ``-s`` to see the report:
    .venv/bin/python -m pytest tests/unit/test_offline_extractor.py -q -s

Gold set: tests/data/extraction_gold.jsonl, labelled by hand. Lines without "split" (ids g..) are
the development set, labelled before any rule was written. Lines with "split": "holdout" came in
four batches (ids h.., k.., n.., f..), each written later and scored once before anything was
changed; those first-run figures are the honest estimate for unseen text and are recorded in
docs/offline-extractor.md. Batches h, k and n then informed generic fixes; batch f never did. Later, batch p was added
(personal chat; scored before its fixes, then tuned on) and batch q (written after them, never tuned on).
The BASELINE figures are asserted over the whole file, as a regression guard.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from service.ai.extraction import ExtractedFact, Message
from service.ai.offline.extractor import OfflineExtractor
from service.ai.offline.text import PROJECT_ENTITY, USER_ENTITY
from service.core.domain import CATEGORIES, Scope

GOLD = Path(__file__).resolve().parents[1] / "data" / "extraction_gold.jsonl"

# Measured on the whole gold file (204 snippets: 90 development, 114 held-out) — see docs/offline-extractor.md:
#   category precision 0.920  recall 0.877   entity precision 0.930  recall 0.954
# These are optimistic (most of the file has informed the rules); on unseen text the first-run
# figures were category P 0.63-0.92 / R 0.30-0.76. The baselines sit a few points below the
# whole-file figures so that a change which makes extraction worse fails here.
BASELINE = {
    "category_precision": 0.89,
    "category_recall": 0.85,
    "entity_precision": 0.90,
    "entity_recall": 0.92,
}


def load_gold() -> list[dict[str, Any]]:
    return [json.loads(line) for line in GOLD.read_text(encoding="utf-8").splitlines() if line.strip()]


def messages_of(item: dict[str, Any]) -> list[Message]:
    return [Message(**m) for m in item["messages"]]


def matches(fact: ExtractedFact, expected: dict[str, Any]) -> bool:
    """A predicted fact matches an expected one when its content holds every key word (case-insensitive)."""
    content = fact.content.casefold()
    return all(word.casefold() in content for word in expected["content_contains"].split())


@dataclass
class Score:
    predicted: int = 0
    expected: int = 0
    correct: int = 0
    content_only: int = 0  # matched on key words but with another category
    per_category: dict[str, Counter[str]] = field(default_factory=dict)
    ent_predicted: int = 0
    ent_expected: int = 0
    ent_correct: int = 0
    misses: list[str] = field(default_factory=list)

    def cat(self, name: str) -> Counter[str]:
        return self.per_category.setdefault(name, Counter())

    @staticmethod
    def ratio(a: int, b: int) -> float:
        return a / b if b else 1.0

    def figures(self) -> dict[str, float]:
        return {
            "category_precision": self.ratio(self.correct, self.predicted),
            "category_recall": self.ratio(self.correct, self.expected),
            "entity_precision": self.ratio(self.ent_correct, self.ent_predicted),
            "entity_recall": self.ratio(self.ent_correct, self.ent_expected),
        }


async def score(items: list[dict[str, Any]]) -> Score:
    extractor = OfflineExtractor()
    s = Score()
    for item in items:
        result = await extractor.extract(messages_of(item), item["project_id"])
        facts, expected = result.facts, item["expected"]
        s.predicted += len(facts)
        s.expected += len(expected)
        for fact in facts:
            s.cat(fact.category)["predicted"] += 1
        for exp in expected:
            s.cat(exp["category"])["expected"] += 1
        # One-to-one: each expected fact takes the first unused predicted fact that matches it,
        # preferring one with the same category.
        used: set[int] = set()
        for exp in expected:
            candidates = [i for i, f in enumerate(facts) if i not in used and matches(f, exp)]
            same = [i for i in candidates if facts[i].category == exp["category"]]
            if same:
                used.add(same[0])
                s.correct += 1
                s.cat(exp["category"])["correct"] += 1
            elif candidates:
                used.add(candidates[0])
                s.content_only += 1
                s.misses.append(f"{item['id']}: expected {exp['category']} got {facts[candidates[0]].category}: "
                                f"{facts[candidates[0]].content!r}")
            else:
                s.misses.append(f"{item['id']}: missed {exp['category']} {exp['content_contains']!r}")
        for i, fact in enumerate(facts):
            if i not in used:
                s.misses.append(f"{item['id']}: extra {fact.category}: {fact.content!r}")
        structural = {USER_ENTITY, PROJECT_ENTITY, (item["project_id"] or "").casefold()}
        got = {e.name.casefold() for f in facts for e in f.entities} - structural
        want = {name.casefold() for exp in expected for name in exp["entities"]}
        s.ent_predicted += len(got)
        s.ent_expected += len(want)
        s.ent_correct += len(got & want)
        for name in sorted(got - want):
            s.misses.append(f"{item['id']}: extra entity {name!r}")
        for name in sorted(want - got):
            s.misses.append(f"{item['id']}: missed entity {name!r}")
    return s


def report(title: str, s: Score) -> str:
    f = s.figures()
    lines = [
        f"== {title}: {s.predicted} predicted, {s.expected} expected, {s.correct} correct "
        f"({s.content_only} more matched on content with another category)",
        f"   category precision {f['category_precision']:.3f}  recall {f['category_recall']:.3f}   "
        f"entity precision {f['entity_precision']:.3f}  recall {f['entity_recall']:.3f} "
        f"({s.ent_correct}/{s.ent_predicted} predicted, {s.ent_correct}/{s.ent_expected} expected)",
        f"   {'category':<17}{'pred':>5}{'exp':>5}{'ok':>5}{'prec':>7}{'rec':>7}",
    ]
    for name in CATEGORIES:
        c = s.per_category.get(name, Counter())
        lines.append(
            f"   {name:<17}{c['predicted']:>5}{c['expected']:>5}{c['correct']:>5}"
            f"{Score.ratio(c['correct'], c['predicted']):>7.2f}{Score.ratio(c['correct'], c['expected']):>7.2f}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Quality
# --------------------------------------------------------------------------------------------


def test_gold_file_is_well_formed() -> None:
    items = load_gold()
    dev = [i for i in items if i.get("split") != "holdout"]
    assert len(dev) >= 60
    assert len({i["id"] for i in items}) == len(items)
    counts = Counter(e["category"] for i in dev for e in i["expected"])
    assert set(counts) == set(CATEGORIES)
    assert min(counts.values()) >= 3
    assert any(not i["expected"] for i in dev)
    for item in items:
        assert 1 <= len(item["messages"]) <= 6
        messages_of(item)  # valid roles and contents


async def test_quality_against_gold() -> None:
    items = load_gold()
    whole = await score(items)
    print()
    print(report("development set (g)", await score([i for i in items if i.get("split") != "holdout"])))
    for batch in ("h", "k", "n", "f", "p", "q"):
        print(report(f"held-out batch {batch}", await score([i for i in items if i["id"].startswith(batch)])))
    print(report("whole file", whole))
    print("   misses (whole file):")
    for line in whole.misses:
        print(f"     {line}")
    figures = whole.figures()
    for key, floor in BASELINE.items():
        assert figures[key] >= floor, f"{key} {figures[key]:.3f} fell below the baseline {floor}"


# --------------------------------------------------------------------------------------------
# Behaviour
# --------------------------------------------------------------------------------------------


def msgs(*pairs: tuple[str, str]) -> list[Message]:
    return [Message(role=role, content=content) for role, content in pairs]  # type: ignore[arg-type]


async def test_result_shape() -> None:
    result = await OfflineExtractor().extract(msgs(("user", "I prefer tabs over spaces.")))
    assert result.extractor == "offline"
    assert result.usage.total_tokens == 0 and result.usage.calls == 0
    assert result.dropped == 0
    [fact] = result.facts
    assert fact.category == "preference"
    assert fact.content == "I prefer tabs over spaces."


async def test_assistant_system_and_tool_text_is_ignored() -> None:
    result = await OfflineExtractor().extract(
        msgs(
            ("system", "The user prefers Python and works at Google."),
            ("assistant", "I prefer Neovim, and we always use ruff for linting. We decided to use Django."),
            ("tool", "We depend on requests 2.31."),
        ),
        project_id="web",
    )
    assert result.facts == []


async def test_a_question_yields_nothing() -> None:
    extractor = OfflineExtractor()
    for question in ("Should we use FastAPI or Django for this project?", "how do I pin numpy to 1.26",
                     "Can you explain what a Python decorator is?"):
        assert (await extractor.extract(msgs(("user", question)), "p")).facts == []


async def test_a_clause_that_points_back_stays_with_what_it_points_to() -> None:
    extractor = OfflineExtractor()
    [fact] = (await extractor.extract(msgs(
        ("user", "I'm allergic to peanuts, so please never suggest recipes with them.")))).facts
    assert "peanuts" in fact.content and "recipes with them" in fact.content
    # Independent clauses without such a pronoun are still facts of their own.
    text = "I live in Lisbon and I work as a nurse at the city hospital."
    split = (await extractor.extract(msgs(("user", text)))).facts
    assert [f.content for f in split] == ["I live in Lisbon", "I work as a nurse at the city hospital."]


async def test_greetings_and_thanks_yield_nothing() -> None:
    result = await OfflineExtractor().extract(
        msgs(("user", "Hi there!"), ("assistant", "Hello! How can I help?"), ("user", "Thanks, that's all. Bye!"))
    )
    assert result.facts == []


async def test_output_is_deterministic() -> None:
    items = load_gold()
    extractor = OfflineExtractor()
    first = [(await extractor.extract(messages_of(i), i["project_id"])).model_dump() for i in items]
    second = [(await OfflineExtractor().extract(messages_of(i), i["project_id"])).model_dump() for i in items]
    assert first == second


async def test_categories_are_valid_and_relations_refer_to_the_facts_entities() -> None:
    extractor = OfflineExtractor()
    total_relations = 0
    for item in load_gold():
        for fact in (await extractor.extract(messages_of(item), item["project_id"])).facts:
            assert fact.category in CATEGORIES
            names = {e.name for e in fact.entities}
            assert len(names) == len(fact.entities), "entity names are unique within a fact"
            for rel in fact.relations:
                total_relations += 1
                assert rel.subject in names and rel.object in names, (rel, names)
                assert rel.predicate.replace("_", "").isalpha() and rel.predicate.islower()
                assert rel.fact == fact.content
    assert total_relations >= 40


async def test_first_person_relations_and_entity_types() -> None:
    extractor = OfflineExtractor()
    facts = (await extractor.extract(msgs(("user", "My name is Priya and I work at Stripe. I live in Lisbon.")))).facts
    rels = {(r.subject, r.predicate, r.object) for f in facts for r in f.relations}
    assert ("user", "is_named", "Priya") in rels
    assert ("user", "works_at", "Stripe") in rels
    assert ("user", "lives_in", "Lisbon") in rels
    types = {e.name: e.type for f in facts for e in f.entities}
    assert types == {"Priya": "person", "Stripe": "organization", "Lisbon": "place", "user": "person"}
    assert {f.category for f in facts} == {"personal_fact"}


async def test_project_relations_versions_and_preferences() -> None:
    extractor = OfflineExtractor()
    [stack] = (await extractor.extract(msgs(("user", "This project uses Python 3.12 with FastAPI.")), "api")).facts
    assert stack.category == "tech_stack"
    assert "3.12" in stack.content
    assert {(r.subject, r.predicate, r.object) for r in stack.relations} == {("api", "uses", "Python"),
                                                                           ("api", "uses", "FastAPI")}
    assert {e.name: e.type for e in stack.entities}["api"] == "project"

    [pref] = (await extractor.extract(msgs(("user", "I prefer Vim over Emacs.")))).facts
    assert [(r.subject, r.predicate, r.object) for r in pref.relations] == [("user", "prefers_over", "Vim")]
    assert "Emacs" in pref.content

    [switch] = (await extractor.extract(msgs(("user", "We replaced RabbitMQ with Kafka.")), "p")).facts
    assert ("RabbitMQ", "replaced_by", "Kafka") in {(r.subject, r.predicate, r.object) for r in switch.relations}

    [negated] = (await extractor.extract(msgs(("user", "We don't use Docker for local development.")), "p")).facts
    assert negated.category == "tech_stack"
    assert negated.relations == []  # a negated use is stated, but is no "uses" edge
    assert [e.name for e in negated.entities] == ["Docker"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I started at Shopify on 2023-05-01.", "2023-05-01"),
        ("Since March 2024 I've been leading the platform team at Zalando.", "2024-03-01"),
        ("We moved to Kafka on 2 March 2024.", "2024-03-02"),
        ("We replaced RabbitMQ with Kafka in 2023.", "2023-01-01"),
        ("We use Python 3.12 and FastAPI.", None),
    ],
)
async def test_valid_at_from_explicit_dates(text: str, expected: str | None) -> None:
    [fact] = (await OfflineExtractor().extract(msgs(("user", text)), "p")).facts
    assert fact.valid_at == expected


async def test_scope_is_global_only_when_said() -> None:
    extractor = OfflineExtractor()
    [everywhere] = (await extractor.extract(msgs(("user", "In all my projects I use 4-space indentation.")), "p")).facts
    assert everywhere.scope is Scope.GLOBAL
    [local] = (await extractor.extract(msgs(("user", "We use Django for the admin.")), "p")).facts
    assert local.scope is None


async def test_arbitrary_text_never_breaks_the_models() -> None:
    """Seeded fuzz: whatever the user types, every fact validates and relations stay consistent."""
    rng = random.Random(7)
    vocab = ("I", "we", "use", "prefer", "Python", "3.12", "My", "Name", "Is", "At", "In", "Lisbon", "`svc`", "called",
             "'Blue", "Falcon'", "then", "first", ",", ";", ":", "and", "numpy<2", "?", "!", "\n- ", "\n1. ", "since",
             "2024-02-30", "March", "2023", "Über", "naïve", "日本", "C++", "C#", ".NET", "k8s", "\u2019s", "“quoted”")
    extractor = OfflineExtractor()
    for _ in range(200):
        text = " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 120)))
        capitals = " ".join(w.capitalize() for w in rng.choices(["alpha", "beta", "gamma", "delta"], k=60))
        for content in (text, f"We use {capitals} daily."):
            result = await extractor.extract(msgs(("user", content)), rng.choice([None, "proj"]))
            for fact in result.facts:
                names = {e.name for e in fact.entities}
                assert all(len(n) <= 200 for n in names)
                assert all(r.subject in names and r.object in names for r in fact.relations)


async def test_long_conversation_is_bounded() -> None:
    text = " ".join(f"We use Django {i}.{i} for service number {i}." for i in range(200))
    result = await OfflineExtractor(max_facts=10).extract(msgs(("user", text)), "p")
    assert len(result.facts) == 10


# --------------------------------------------------------------------------------------------
# Facts keep their meaning and their subject
# --------------------------------------------------------------------------------------------


async def test_a_sentence_that_names_nothing_joins_the_one_it_points_back_to() -> None:
    extractor = OfflineExtractor()
    said = "I take my coffee black, no sugar. I really prefer it that way."
    [fact] = (await extractor.extract(msgs(("user", said)))).facts
    assert fact.category == "preference"
    assert "coffee black" in fact.content and "prefer it that way" in fact.content
    # alone, with nothing before it, it is no fact
    assert (await extractor.extract(msgs(("user", "I really prefer it that way.")))).facts == []


async def test_categories_amounts_and_events() -> None:
    extractor = OfflineExtractor()

    async def one(text: str) -> str:
        [fact] = (await extractor.extract(msgs(("user", text)))).facts
        return fact.category

    assert await one("When I fly I prefer window seats.") == "preference"  # the circumstance yields to the stance
    assert await one("Before I merge, I run the whole test suite.") == "workflow"
    assert await one("my hotel budget is 150 euros a night") == "preference"
    assert await one("Our rent is 1,450 a month.") == "personal_fact"
    assert await one("I ran my first half marathon last Saturday!") == "personal_fact"
    assert await one("Tom and I are meeting on Friday.") == "personal_fact"  # "Tom and I" is one subject
    assert await one("We fixed the flaky login test yesterday.") != "personal_fact"  # a codebase's event


def relations_of(facts: list[ExtractedFact]) -> set[tuple[str, str, str]]:
    return {(r.subject, r.predicate, r.object) for f in facts for r in f.relations}


async def test_a_third_partys_fact_is_about_the_third_party() -> None:
    extractor = OfflineExtractor()
    got = relations_of((await extractor.extract(msgs(("user", "My sister Maya lives in Lisbon.")))).facts)
    assert got == {("Maya", "sister_of", USER_ENTITY), ("Maya", "lives_in", "Lisbon")}
    got = relations_of((await extractor.extract(msgs(("user", "Maya, my cousin, works at Deloitte.")))).facts)
    assert got == {("Maya", "cousin_of", USER_ENTITY), ("Maya", "works_at", "Deloitte")}
    # someone unnamed: nothing is said of the user
    got = relations_of((await extractor.extract(msgs(("user", "My brother lives in Berlin.")))).facts)
    assert not any(s == USER_ENTITY for s, _, _ in got)


async def test_a_named_project_and_a_role_on_it() -> None:
    extractor = OfflineExtractor()
    said = "Orion is a web app built with Django, PostgreSQL and React."
    facts = (await extractor.extract(msgs(("user", said)))).facts
    assert relations_of(facts) == {("Orion", "uses", "Django"), ("Orion", "uses", "PostgreSQL"),
                                   ("Orion", "uses", "React")}
    assert {(e.name, e.type) for e in facts[0].entities} >= {("Orion", "project")}
    facts = (await extractor.extract(msgs(("user", "My colleague Tom Becker is the tech lead on Orion.")))).facts
    assert relations_of(facts) == {("Tom Becker", "colleague_of", USER_ENTITY),
                                   ("Tom Becker", "tech_lead_of", "Orion")}


def test_facts_keep_their_meaning_subject_and_types() -> None:
    """A health fact keeps its condition; a named project is the entity, typed project; the people a message names
    are people; a statement of a project's stack is a fact."""
    extractor = OfflineExtractor()

    def facts(text: str) -> list[ExtractedFact]:
        return extractor.extract_sync([Message(role="user", content=text)], None)

    allergy = facts("Yes, I have a peanut allergy, so never suggest anything with peanuts.")
    assert any("peanut allergy" in f.content for f in allergy) and any("Never suggest" in f.content for f in allergy)
    [atlas] = facts("I work on a project called Atlas; it's a Flask app with a PostgreSQL database.")
    types = {e.name: e.type for e in atlas.entities}
    assert types["Atlas"] == "project" and {"Flask", "PostgreSQL"} <= set(types) and "project" not in types
    [manager] = facts("My manager is Sarah Lin now, Tom moved to another team.")
    assert {e.name: e.type for e in manager.entities}["Sarah Lin"] == "person"
    [stack] = facts("Atlas is a Flask app with a PostgreSQL database.")
    assert stack.category == "tech_stack"
    assert {e.name: e.type for e in facts("I live in Tokyo.")[0].entities}["Tokyo"] == "place"
