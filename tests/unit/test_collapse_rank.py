"""Collapse by source (service/search/results.py) and the session context's order and budget
(service/search/context.py, service/search/context_format.py) on memories built in memory: no store involved."""

from __future__ import annotations

from datetime import UTC, datetime

from service.ai.tokens import HFTokenCounter, default_tokenizer
from service.core.domain import Memory, Message, Scope
from service.memory.windows import anchored_time, event_time
from service.schemas.memories import ContextSection
from service.search import context, context_format
from service.search.fusion import Fused
from service.search.results import Collapse

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def mem(mid: str, content: str, sources: list[str] | None = None, *, task: str = "t1",
        category: str = "personal_fact", project: str | None = None, at: str = "2026-11-30T00:00:00") -> Memory:
    return Memory(id=mid, user_id="u", content=content, category=category,
                  scope=Scope.PROJECT if project else Scope.GLOBAL, project_id=project, hash=mid, created_at=at,
                  updated_at=at, occurred_at=at, task_id=task, source_message_ids=sources or [])


def collapse(memories: list[Memory], enabled: bool = True) -> list[tuple[str, list[str]]]:
    kept = Collapse(enabled)
    for i, m in enumerate(memories):
        kept.add(m, Fused(m.id, score=1.0 / (i + 1), signals={"dense": (i + 1, 0.5)}, best_rank=i + 1))
    return [(r.id, [f.id for f in r.also]) for r in kept.out]


def test_a_covered_memory_folds_into_the_better_ranked_one() -> None:
    window = mem("w", "user: I prefer tabs\nassistant: Noted", ["0", "1"], category="interaction")
    fact = mem("f", "Prefers tabs", ["0"], category="preference")
    other = mem("o", "Lives in Oslo", ["2"])
    assert collapse([window, other, fact]) == [("w", ["f"]), ("o", [])]
    assert collapse([window, other, fact], enabled=False) == [("w", []), ("o", []), ("f", [])]


def test_a_window_ranked_below_its_facts_takes_the_first_ones_slot_and_absorbs_the_rest() -> None:
    f0 = mem("f0", "Prefers tabs", ["0"], category="preference")
    f1 = mem("f1", "Works at Acme", ["1"])
    raw = mem("r", "Likes tea")  # no sources: never folds
    window = mem("w", "user: I prefer tabs\nuser: I work at Acme", ["0", "1"], category="interaction")
    kept = Collapse(True)
    for i, m in enumerate([f0, raw, f1, window]):
        kept.add(m, Fused(m.id, score=1.0 / (i + 1), signals={"graph": (i + 1, 0.5)}, best_rank=i + 1))
    assert [(r.id, [f.id for f in r.also]) for r in kept.out] == [("w", ["f0", "f1"]), ("r", [])]
    assert kept.out[0].score == 1.0  # the slot's score: the covered fact was ranked first
    assert [(f.id, f.kind) for f in kept.out[0].also] == [("f0", "fact"), ("f1", "fact")]
    assert kept.out[1].source == "graph"  # only the graph retriever returned it


def test_message_indexes_of_two_writes_never_fold() -> None:
    a = mem("a", "user: hello there", ["0", "1"], task="t1", category="interaction")
    b = mem("b", "Prefers Rust", ["0"], task="t2", category="preference")
    assert collapse([a, b]) == [("a", []), ("b", [])]


def test_context_order_and_restatements() -> None:
    fact = mem("f", "Prefers Python over JavaScript", ["0"], category="preference")
    window = mem("w", "user: I prefer Python over JavaScript\nassistant: Noted", ["0", "1"], category="interaction")
    lone = mem("l", "user: the build was slow today", ["2"], category="interaction", at="2026-11-30T12:00:00")
    same = mem("s", "prefers  python over javascript", category="preference", task="t9")
    old = mem("g", "Lives in Oslo", at="2020-01-01T00:00:00")
    proj = mem("p", "Uses FastAPI", category="tech_stack", project="shop", at="2020-01-01T00:00:00")
    ranked = context.rank([window, lone, same, old, proj, fact], "shop", [], {}, NOW)
    assert [m.id for m in ranked.memories] == ["p", "f", "g", "l"]  # project first, facts before windows
    assert ranked.restated == 2  # the fact's window, and the same text again
    # a query's hits first; then often retrieved before recent among equals
    asked = context.rank([fact, old, proj, lone], "shop", ["l"], {}, NOW)
    assert [m.id for m in asked.memories][:1] == ["l"]
    counted = context.rank([fact, old], None, [], {"g": 40}, NOW)
    assert [m.id for m in counted.memories] == ["g", "f"]


def test_the_budget_is_kept_in_the_embedders_tokens_and_says_what_it_left_out() -> None:
    path = default_tokenizer()
    assert path is not None
    counter = HFTokenCounter(path, "all-MiniLM-L6-v2")
    memories = [mem(f"m{i}", f"Fact number {i} about the harbour tide tables of the northern coast") for i in range(30)]
    ranked = context.rank(memories, None, [], {}, NOW)
    lessons = ContextSection(title="From earlier sessions", lines=["- Run the linter before committing"] * 3)
    ctx = context.build("u", None, ranked, per_category=200, total=30, max_tokens=120, counter=counter,
                        sections=[lessons])
    text = context_format.render_markdown(ctx)
    assert ctx.tokens == counter.count(text) <= 120
    assert ctx.tokens == sum(counter.count(line) for line in text.splitlines())  # lines add up: what build() sums
    assert 0 < len(ctx.order) < 30 and ctx.omitted == 30 - len(ctx.order)
    assert text.rstrip().endswith(f"_… {ctx.omitted} more not shown (raise max_tokens)_")
    assert "## From earlier sessions\n- Run the linter" in text and ctx.sections[0].lines
    assert ctx.order == [m.id for m in ranked.memories][: len(ctx.order)]
    whole = context.build("u", None, ranked, per_category=200, total=30, max_tokens=5000, counter=counter)
    assert whole.omitted == 0 and "more not shown" not in context_format.render_markdown(whole)
    # the word pieces are the tokenizer's, not characters or words
    assert counter.count("tokenization") == 2 and counter.count("a b") == 2


def test_max_chars_takes_the_most_useful_first() -> None:
    memories = [mem(f"m{i}", f"Memory {i} " + "x" * 40, at=f"2026-11-{10 + i:02d}T00:00:00") for i in range(10)]
    ranked = context.rank(memories, None, [], {}, NOW)
    ctx = context.build("u", None, ranked, per_category=200, total=10)
    text = context_format.render_markdown(ctx, 300)
    assert len(text) <= 300 and "Memory 9 " in text and "Memory 0 " not in text  # the most recent first
    assert "more not shown (raise max_chars)" in text


def test_a_relative_time_in_a_message_resolves_against_its_session_date() -> None:
    said = "2023-05-08T13:56:00"
    messages = [Message(role="user", content=text, timestamp=said) for text in (
        "I went to a support group yesterday.", "Last Saturday we painted a sunrise.", "I adopted a dog two weeks ago",
        "We may go there. I like painting.", "Last year I ran a marathon")]
    accepted = "2026-01-01T00:00:00+00:00"
    assert [anchored_time([i], messages, accepted) for i in range(5)] == [
        "2023-05-07T00:00:00+00:00", "2023-05-06T00:00:00+00:00", "2023-04-24T00:00:00+00:00",
        "2023-05-08T13:56:00+00:00",  # no time named ("may" is a verb): the session date
        "2022-01-01T00:00:00+00:00"]
    # a window: the first of its messages that names a time; without a timestamp, the acceptance time
    assert anchored_time([3, 0], messages, accepted) == "2023-05-07T00:00:00+00:00"
    assert anchored_time([0], [Message(role="user", content="yesterday")], accepted) == accepted


def test_an_event_keeps_when_it_was_said_and_the_day_it_is_for() -> None:
    said = "2026-11-30T09:00:00"  # a Monday
    messages = [Message(role="user", content=text, timestamp=said) for text in (
        "Tom and I are meeting on Friday.", "I ran my first half marathon last Saturday!", "I prefer aisle seats.")]
    accepted = "2026-12-01T00:00:00+00:00"
    plan = event_time([0], messages, accepted)
    assert plan is not None and plan.event_at == "2026-12-04T00:00:00+00:00"
    assert plan.said_at == plan.occurred_at == anchored_time([0], messages, accepted) == "2026-11-30T09:00:00+00:00"
    past = event_time([1], messages, accepted)
    assert past is not None and past.occurred_at == past.event_at == "2026-11-28T00:00:00+00:00"
    assert past.metadata() == {"said_at": "2026-11-30T09:00:00+00:00", "event_at": "2026-11-28T00:00:00+00:00"}
    assert event_time([2], messages, accepted) is None


def test_the_context_keeps_a_windows_words_when_its_fact_is_a_fragment() -> None:
    window = mem("w", "user: I take my coffee black, no sugar. I really prefer it that way.\nassistant: Noted!",
                 ["0", "1"], category="interaction")
    fragment = mem("f", "I really prefer it that way.", ["0"], category="preference")
    other = mem("o", "Lives in Oslo", ["2"])
    ranked = context.rank([other, window, fragment], None, [], {}, NOW)
    assert "w" in [m.id for m in ranked.memories] and "f" not in [m.id for m in ranked.memories]
    assert ranked.restated == 1
    ctx = context.build("u", None, ranked, per_category=10, total=3)
    assert "coffee" in context_format.render_markdown(ctx)
    # a fact that says what its window's user said still leaves the window out
    good = mem("g", "I take my coffee black, no sugar.", ["0"], category="preference")
    ranked = context.rank([other, window, good], None, [], {}, NOW)
    assert [m.id for m in ranked.memories] == ["g", "o"] and ranked.restated == 1


def test_within_a_budget_the_users_words_take_their_facts_place() -> None:
    said = "user: We renovated the kitchen in April, then repainted the hallway, and the garden took all summer."
    window = mem("w", said, ["0"], category="interaction", at="2026-01-01T00:00:00")
    thin = mem("f", "We renovated the kitchen.", ["0"], category="personal_fact", at="2026-11-30T00:00:00")
    ranked = context.rank([thin, window], None, [], {}, NOW)
    assert [m.id for m in ranked.memories] == ["w", "f"]  # the words first, in the place of the fact
