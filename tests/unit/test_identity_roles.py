"""What a memory says an entity is (service/identity/roles.py), and the gate's use of it: roles that disagree
never let a pair merge; no role, or agreeing roles, change nothing."""

from __future__ import annotations

import pytest

from service.identity.gate import ResolutionGate
from service.identity.roles import agree, disagree, role_of, role_phrase
from service.stores.graph import MERGE, PENDING, Candidate

GATE = ResolutionGate()


@pytest.mark.parametrize(("text", "name", "role"), [
    ("John Smith, the plumber, quoted $450 to replace the valve.", "John Smith", "plumber"),  # apposition
    ("Jordan Lee, Emma's soccer coach, moved practice to Tuesdays.", "Jordan Lee", "soccer coach"),
    ("Apex, the logistics firm in Memphis, rejected my application.", "Apex", "logistics firm"),
    ("Chris Taylor is the contractor redoing our kitchen countertops.", "Chris Taylor", "contractor"),  # copula
    ("My neighbor Maria Garcia is watering the plants.", "Maria Garcia", "neighbor"),  # possessive before
    ("User's barber Alex Kim recommends a shorter cut.", "Alex Kim", "barber"),
    ("Our new VP of Sales, John Smith, wants weekly reports.", "John Smith", "vp of sales"),
    ("Maria Garcia from the vendor's legal team sent redlines.", "Maria Garcia", "from vendor's legal team"),
    ("Mohammed Ali at the corner pharmacy checked my prescription.", "Mohammed Ali", "at corner pharmacy"),
    ("Mohammed Ali joined our data science team as a senior analyst.", "Mohammed Ali", "senior analyst"),
])
def test_each_shape_gives_the_role(text: str, name: str, role: str) -> None:
    assert role_of(text, name) == role


@pytest.mark.parametrize(("text", "name"), [
    ("Sold a little Bitcoin to pay for the roof repair.", "Bitcoin"),  # "a" is no possessive
    ("A. Novak is the name on the invoice.", "A. Novak"),  # says nothing about what it is
    ("My in-laws live outside Paris in Lamar County.", "Paris"),  # a verb phrase, not a role
    ("Hana Sato recommended Kitchen as the first novel I should read.", "Hana Sato"),  # not the subject's capacity
    ("Need to send Lucas Moreau the photos.", "Lucas Moreau"),
    ("Sarah Johnson asked to move our one-on-one.", "Sarah Johnson"),
    ("A note about Sarah.", "Sara"),  # the name is not in the text
    ("Thanks for the advice, Jon!", "Jon"),  # names spoken to, in a chat: no role
    ("Hey Caroline, your art is amazing.", "Caroline"),
    ("Caroline, that's cool!", "Caroline"),
    ("Sorry about your job Jon, but a new business sounds great.", "Jon"),
    ("I got a puppy. Her name's Coco and she's adorable.", "Coco"),
])
def test_no_role_where_the_text_gives_none(text: str, name: str) -> None:
    assert role_of(text, name) is None


def test_roles_agree_by_their_head_noun() -> None:
    assert agree("physical therapist", "therapist") and agree("vp of sales", "sales vp")
    assert agree("physiotherapist", "physical therapist") and not agree("ist", "therapist")
    assert not agree("plumber", "vp of sales") and not agree("codename", "billing rewrite")
    assert disagree(["plumber"], ["vp of sales"]) and not disagree(["plumber"], ["vp of sales", "plumber"])
    assert not disagree([], ["plumber"]) and not disagree(["plumber"], [])  # one side silent: no evidence
    assert role_phrase("the user's plumber") == "plumber" and role_phrase("a climbing gym on 5th St") == "climbing gym"


def test_the_gate_never_merges_names_whose_roles_disagree() -> None:
    held = Candidate("p", "John Smith", "person", roles=("plumber",))
    other = GATE.decide("John Smith", "person", None, [held], ["vp of sales"])
    assert (other.action, other.match_type, other.target_id) == (PENDING, "other_role", "p")
    assert "other role" in other.reason
    assert GATE.decide("John Smith", "person", None, [held], ["plumber"]).action == MERGE  # the same role
    assert GATE.decide("John Smith", "person", None, [held], []).action == MERGE  # no role: no evidence
    products = Candidate("a", "Apex", "organization", roles=("climbing gym",))
    assert GATE.decide("Apex", "organization", None, [products], ["logistics firm"]).action == PENDING
