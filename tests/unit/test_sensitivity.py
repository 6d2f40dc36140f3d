"""The tier order, a read's ceiling (lowered, never raised), and what a task result keeps under a ceiling."""

from __future__ import annotations

from service.core.auth import Caller
from service.core.sensitivity import Sensitivity, allowed, current, lowered, of_category, rank, redact, visible

P, N, V, S = Sensitivity.PUBLIC, Sensitivity.INTERNAL, Sensitivity.PRIVATE, Sensitivity.SECRET


def test_order_default_and_category_tiers() -> None:
    assert [rank(t) for t in (P, N, V, S)] == [0, 1, 2, 3]
    assert rank(None) == rank("") == rank("bogus") == rank(N)  # written before tiers: internal
    assert of_category("personal_fact") is V and of_category("preference") is N
    assert of_category("personal_fact", "public") is P  # the write's own wins
    assert allowed(None) is None and allowed(S) is None  # nothing to filter
    assert allowed(P) == (P,) and allowed(V) == (P, N, V)


def test_a_read_lowers_the_keys_ceiling_and_never_raises_it() -> None:
    key = Caller(key_id="k", key_user="u", max_sensitivity=N)
    assert key.ceiling() is N and key.ceiling("public") is P and key.ceiling("secret") is N
    assert Caller(key_id="k", key_user="u").ceiling() is None  # a key made before tiers reads every tier
    assert Caller().ceiling("private") is V
    assert current() is None
    with lowered(N) as outer:
        assert outer is N and current() is N
        with lowered(S) as inner:  # asking for more changes nothing
            assert inner is N
        with lowered(P):
            assert current() is P and not visible("internal") and visible("public")
        assert current() is N
    assert current() is None and visible("secret")


def test_a_task_result_keeps_only_what_the_ceiling_lets_through() -> None:
    result = {"memories": [{"id": "a", "sensitivity": "public"}, {"id": "b", "sensitivity": "secret"},
                           {"id": "c"}], "graph": "stored", "note": None, "list": [None, 1]}
    assert redact(result, P) == {"memories": [{"id": "a", "sensitivity": "public"}, {"id": "c"}],
                                 "graph": "stored", "note": None, "list": [None, 1]}
    assert redact({"memory": {"id": "b", "sensitivity": "private"}}, N) == {"memory": None}
    assert redact(result) == result  # no ceiling
