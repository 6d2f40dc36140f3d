"""The current value first (service/memory/currency.py): a newer statement of a change moves above an older result
about the same thing; another slot, another relative, an older change or a transcript's chatter moves nothing."""

from __future__ import annotations

from service.memory.currency import newer_first, successors_first
from service.schemas.search import SearchResult


def hit(mid: str, said: str, day: str) -> SearchResult:
    return SearchResult(id=mid, content=f"user: {said}\nassistant: Noted.", score=1.0, source="vector",
                        category="interaction", scope=None, project_id=None, created_at=f"{day}T09:00:00+00:00",
                        occurred_at=f"{day}T09:00:00+00:00")


def test_a_newer_change_moves_above_the_older_value_it_shares_a_name_or_slot_word_with() -> None:
    old = hit("old", "for context Orion is our payments service, FastAPI + Postgres 15, runs on ECS", "2026-01-20")
    other = hit("other", "I live in Neovim, skip the VS Code menus", "2026-01-12")
    new = hit("new", "we bumped Orion to Postgres 16 last night, zero drama", "2026-02-17")
    ranked = newer_first([old, other, new], "which Postgres version does Orion run?")
    assert [r.id for r in ranked] == ["new", "old", "other"]
    assert [(s.retriever, s.rank) for s in ranked[0].signals] == [("newer", 1)]
    seats = newer_first([hit("w", "always get me a window seat, I sleep against the wall", "2026-01-05"),
                         hit("a", "aisle seats from now on please", "2026-02-10")], "what kind of seat do I want?")
    assert [r.id for r in seats] == ["a", "w"]


def test_nothing_moves_for_another_subject_an_older_change_or_a_statement_without_a_change() -> None:
    sister = hit("s", "my sister lives in Lyon with the kids", "2026-01-05")
    brother = hit("b", "my brother moved to Berlin now", "2026-02-10")
    # two relatives: two cities
    assert [r.id for r in newer_first([sister, brother], "where does my sister live?")] == ["s", "b"]
    mine = hit("m", "we moved to Porto now, the kids love the beach", "2026-02-10")
    # the user's city is not the sister's
    assert [r.id for r in newer_first([sister, mine], "where does my sister live?")] == ["s", "m"]
    early_change = hit("e", "we switched the bakery opening to 6:30 now", "2026-01-01")
    later_plain = hit("l", "the bakery opens at 7 on weekdays", "2026-02-01")
    # the change is the older one
    assert [r.id for r in newer_first([later_plain, early_change], "when does the bakery open?")] == ["l", "e"]
    unrelated = hit("u", "I'm closed Mondays", "2026-01-01")
    budget = hit("x", "we raised our house budget to 500k now", "2026-02-01")
    # no shared name or slot word
    assert [r.id for r in newer_first([unrelated, budget], "what is our budget?")] == ["u", "x"]


def test_one_shared_name_is_not_the_same_thing() -> None:
    lead = hit("lead", "Tom Becker is super strict about it, he's the tech lead on Orion", "2026-01-12")
    bump = hit("bump", "we bumped Orion to Postgres 16 last night, zero drama", "2026-02-17")
    assert [r.id for r in newer_first([lead, bump], "who leads the Orion project technically?")] == ["lead", "bump"]


def test_a_transcripts_lines_are_left_alone() -> None:
    old = SearchResult(id="c1", content="Caroline: I paint landscapes in my studio", score=1.0, source="vector",
                       category="interaction", scope=None, project_id=None, created_at="2026-01-01T00:00:00+00:00")
    new = SearchResult(id="c2", content="Caroline: I paint portraits in my studio now", score=0.9, source="vector",
                       category="interaction", scope=None, project_id=None, created_at="2026-02-01T00:00:00+00:00")
    assert [r.id for r in newer_first([old, new], "what does Caroline paint in her studio?")] == ["c1", "c2"]


def test_a_restated_number_of_one_unit_moves_above_the_older_one() -> None:
    old = hit("old", "we're at 0.81 AUC on the holdout", "2026-01-29")
    new = hit("new", "the new features got us to 0.86 AUC!", "2026-02-19")
    assert [r.id for r in newer_first([old, new], "how well does the churn model score?")] == ["new", "old"]
    # another unit is another thing
    km = hit("km", "I go through a pair every 500 km or so", "2026-01-02")
    mins = hit("min", "my long run is 90 min now", "2026-02-02")
    assert [r.id for r in newer_first([km, mins], "how often do I buy shoes?")] == ["km", "min"]


def test_the_user_with_a_partner_is_the_user_and_a_tool_named_twice_for_one_word_is_one_slot() -> None:
    old = hit("old", "my partner Efua and I are starting to look for a house, budget around 450k", "2026-01-10")
    new = hit("new", "we raised our house budget to 500k", "2026-02-21")
    assert [r.id for r in newer_first([old, new], "how much can we spend?")] == ["new", "old"]
    datadog = hit("dd", "monitoring is Datadog, alerts go to #ops-alerts", "2026-01-09")
    grafana = hit("gr", "finance killed the expensive monitoring contract. we're on Grafana + Prometheus now",
                  "2026-02-10")
    assert [r.id for r in newer_first([datadog, grafana], "what's our observability stack?")] == ["gr", "dd"]


def test_a_who_question_keeps_its_person_above_a_newer_change_that_names_nobody() -> None:
    old = hit("old", "my lab supervisor is Dr. Hendricks, she runs the zebrafish lab", "2026-01-10")
    pay = hit("pay", "they bumped my lab pay to $19 an hour", "2026-02-10")
    assert [r.id for r in newer_first([old, pay], "who is my supervisor in the lab?")] == ["old", "pay"]
    # the same pair for a question a number answers
    assert [r.id for r in newer_first([old, pay], "what do I earn in the lab?")] == ["pay", "old"]


def test_a_result_below_the_first_five_stays_where_it_is() -> None:
    old = hit("old", "for context Orion is our payments service, FastAPI + Postgres 15, runs on ECS", "2026-01-20")
    fillers = [hit(f"f{i}", f"filler number {i} about lunch", "2026-01-01") for i in range(5)]
    new = hit("new", "we bumped Orion to Postgres 16 last night, zero drama", "2026-02-17")
    ranked = newer_first([old, *fillers, new], "which CI do we use?")
    assert ranked[-1].id == "new"
    assert newer_first([old, *fillers[:3], new], "which CI do we use?")[0].id == "new"


def test_the_memory_that_retired_an_older_ones_facts_moves_above_it() -> None:
    lisbon = hit("lisbon", "I live in Lisbon, near the river", "2026-11-30")
    other = hit("other", "I like long walks", "2026-11-30")
    porto = hit("porto", "Big news: Porto it is!", "2026-12-05")
    ranked = successors_first([lisbon, other, porto], {"lisbon": {"porto"}})
    assert [r.id for r in ranked] == ["porto", "lisbon", "other"]
    assert [(s.retriever, s.rank) for s in ranked[0].signals] == [("newer", 1)]
    # already above, or not among the results: nothing moves
    assert [r.id for r in successors_first([porto, lisbon], {"lisbon": {"porto"}})] == ["porto", "lisbon"]
    assert [r.id for r in successors_first([lisbon, other], {"lisbon": {"porto"}})] == ["lisbon", "other"]
