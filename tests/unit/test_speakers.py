"""Transcript lines in the offline link finder ("<Speaker>: <text>"), and the parts of the graph retriever's query
handling that need no store: a possessive is its name, and the names the query matched leave the ranking text."""

from __future__ import annotations

from service.ai.offline.extractor import graph_links
from service.ai.offline.speakers import speaker_lines
from service.ai.offline.text import USER_ENTITY
from service.search.graph import without_names
from service.stores.neo4j.search import lucene_terms


def names(text: str, category: str = "interaction") -> dict[str, str]:
    entities, _ = graph_links(text, category, None)
    return {e.name: e.type for e in entities}


def test_a_speaker_is_a_person_the_line_mentions() -> None:
    assert names("Marta: we went camping at the lake last weekend") == {"Marta": "person"}
    # the speaker is not found by the capitalised-name rule: it starts the sentence
    assert names("Marta went camping") == {}
    both = names("Marta: Hey Tom! Did you see Oslo?")
    assert both == {"Marta": "person", "Tom": "thing", "Oslo": "thing"}


def test_the_first_person_of_a_speakers_line_is_the_speaker() -> None:
    entities, relations = graph_links("Marta Kowalski: I work at Acme and I love Python", "personal_fact", None)
    assert {(r.subject, r.predicate, r.object) for r in relations} == {
        ("Marta Kowalski", "works_at", "Acme"), ("Marta Kowalski", "prefers", "Python")}
    assert USER_ENTITY not in {e.name for e in entities}
    # without a speaker the first person stays the user
    _, plain = graph_links("I work at Acme", "personal_fact", None)
    assert [(r.subject, r.object) for r in plain] == [(USER_ENTITY, "Acme")]


def test_window_lines_carry_their_role_then_the_speaker() -> None:
    window = "user: Marta: I moved to Oslo\nuser: Tom: nice, I like Bergen more\nassistant: noted"
    assert speaker_lines(window) == [("Marta", "I moved to Oslo"), ("Tom", "nice, I like Bergen more"),
                                     (None, "assistant: noted")]
    assert {"Marta", "Tom"} <= set(names(window))


def test_labels_that_name_no_person_are_not_speakers() -> None:
    for text in ("Note: use 4 spaces", "TODO: fix the flaky test", "Python: slow start-up", "Step 2: run it",
                 "Q: what port?", "See also: the runbook", "no label here"):
        assert speaker_lines(text) is None, text
    assert "Note" not in names("Note: Marta moved to Oslo")


def test_a_possessive_matches_its_name() -> None:
    assert lucene_terms("What are Marta's hobbies?") == ["What", "are", "Marta", "hobbies\\?"]
    assert lucene_terms("the Joneses\u2019 dog") == ["the", "Joneses", "dog"]
    assert lucene_terms("don't O'Brien") == ["don't", "O'Brien"]


def test_the_ranking_text_leaves_out_the_names_the_query_uses_as_names() -> None:
    assert without_names("What activities does Marta partake in?", ["Marta"]) == "What activities does partake in?"
    assert without_names("What is Marta's identity?", ["Marta", "Identity"]) == "What is identity?"
    assert without_names("Marta Kowalski and Marta", ["Marta", "Marta Kowalski"]) == "and"
    assert without_names("Acme", ["Acme"]) == ""
    assert without_names("Where is Martan?", ["Marta"]) == "Where is Martan?"
