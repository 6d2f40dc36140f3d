"""The resolution gate's scoring (service/identity/), without embeddings: keys, variants, type families and
the decision bands."""

from __future__ import annotations

import pytest

from service.identity.gate import ResolutionGate, signals
from service.identity.names import compatible, keys_of, name_key, type_family
from service.stores.graph import CREATE, MERGE, PENDING, Candidate


def test_keys_fold_case_accents_and_separators_but_not_symbols() -> None:
    assert name_key("Type Script") == name_key("typescript") == "typescript"
    assert name_key("Node.js") == name_key("NodeJS")
    assert name_key("München") == "munchen"
    assert name_key("C++") != name_key("C") and name_key("C#") != name_key("C")
    assert "kubernetes" in keys_of(["k8s"])  # the lexicon's canonical name is a key too


@pytest.mark.parametrize(("a", "b", "person", "shape"), [
    ("Kuberentes", "Kubernetes", False, "typo"),
    ("NYC", "New York City", False, "acronym"),
    ("MIT", "Massachusetts Institute of Technology", False, "acronym"),
    ("i18n", "internationalization", False, "acronym"),
    ("Stripe", "Stripe, Inc.", False, "contained_words"),
    ("Excel", "Microsoft Excel", False, "contained_words"),
    ("Dr. Rao", "Priya Rao", True, "contained_words"),  # the title left out
    ("Wei", "Zhang Wei Ming", True, "part_name"),
    ("Bob", "Robert", True, "nickname"),
    ("Mel", "Melanie", True, "short_name"),
    ("Python 2", "Python 3", False, None),  # another number is another version, not a typo
    ("Java", "JavaScript", False, None),
    ("Mel", "Melanie", False, None),  # name shapes of people only apply to people
])
def test_known_shapes(a: str, b: str, person: bool, shape: str | None) -> None:
    kind = "person" if person else "tool"
    assert signals(b, kind, None, Candidate("x", a, kind)).variant == shape
    assert signals(a, kind, None, Candidate("x", b, kind)).variant == shape  # both ways round


def test_families() -> None:
    assert type_family("database") == type_family("tool") == "technology"
    assert type_family("organisation") == type_family("company") == "organization"
    assert compatible("thing", "person") and not compatible("person", "place")


def test_bands_and_what_never_merges() -> None:
    gate = ResolutionGate(0.95, 0.85)
    same = [1.0, 0.0]
    assert gate.decide("Type Script", "language", None, [Candidate("t", "TypeScript", "language")]).action == MERGE
    # a known shape only proposes, whatever its embedding says
    mel = gate.decide("Mel", "person", same, [Candidate("m", "Melanie", "person", vector=same)])
    assert mel.action == PENDING and mel.match_type == "short_name" and mel.target_id == "m"
    assert "fuzzy=" in mel.reason and "variant=short_name" in mel.reason
    # an exact name of another family is no candidate; nor is one a reviewer rejected
    assert gate.decide("Jordan", "person", None, [Candidate("j", "Jordan", "place")]).action == CREATE
    rejected = Candidate("m", "Melanie", "person", rejected=(name_key("Mel"),))
    assert gate.decide("Mel", "person", None, [rejected]).action == CREATE
    # blended similarity: 0.45 fuzzy + 0.55 semantic, near-identical vectors and spelling merge
    near = gate.decide("Postgre", "database", same, [Candidate("p", "Postgres", "database", vector=same)])
    assert near.action == MERGE and near.score >= 0.95


def test_ties_go_to_the_lower_id() -> None:
    gate = ResolutionGate()
    cands = [Candidate("b", "TypeScript", "language"), Candidate("a", "Typescript", "language")]
    assert gate.decide("Type Script", "language", None, cands).target_id == "a"
    assert gate.decide("Type Script", "language", None, cands[::-1]).target_id == "a"
