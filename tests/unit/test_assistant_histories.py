"""The personal-assistant histories (scripts/bench/data/assistant_histories.json) keep their rules, and the
benchmark's scoring (scripts/bench/assistant.py) ranks answers and stale values as documented."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench"
DATA = BENCH / "data" / "assistant_histories.json"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_assistant", BENCH / "assistant.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


bench = _script()


@pytest.fixture(scope="module")
def histories() -> list[dict[str, Any]]:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    assert data["version"] == 1
    return list(data["histories"])


def _texts(history: dict[str, Any]) -> list[str]:
    return [m["content"].lower() for s in history["sessions"] for m in s["messages"]]


def test_shape_and_sizes(histories: list[dict[str, Any]]) -> None:
    questions = [q for h in histories for q in h["questions"]]
    assert len(histories) >= 20
    assert len(questions) >= 80
    assert sum(1 for q in questions if q["stale"]) >= 20
    assert len({h["id"] for h in histories}) == len(histories)
    for h in histories:
        assert h["persona"] and 3 <= len(h["sessions"]) <= 6, h["id"]
        for s in h["sessions"]:
            assert s["messages"], h["id"]
            for m in s["messages"]:
                assert m["role"] in ("user", "assistant") and m["content"].strip(), h["id"]
        for q in h["questions"]:
            assert set(q) == {"question", "answer", "stale"}, q
            assert q["question"].strip() and (q["answer"] is None or q["answer"].strip()), q
            assert q["answer"] is not None or q["stale"] is None, q  # a question the history cannot answer
    unanswerable = [q for q in questions if q["answer"] is None]
    assert len(unanswerable) >= 40 and all(sum(q["answer"] is None for q in h["questions"]) >= 1 for h in histories)


def test_sessions_dated_in_increasing_order(histories: list[dict[str, Any]]) -> None:
    for h in histories:
        dates = [s["date"] for s in h["sessions"]]
        for date in dates:
            assert len(date) == 20 and date[:5] == "2026-" and date[10] == "T" and date.endswith(":00Z"), date
        assert dates == sorted(dates) and len(set(dates)) == len(dates), h["id"]


def test_answers_occur_and_stale_values_never_beside_them(histories: list[dict[str, Any]]) -> None:
    for h in histories:
        texts = _texts(h)
        for q in [q for q in h["questions"] if q["answer"] is not None]:
            answer = q["answer"].lower()
            assert any(answer in t for t in texts), (h["id"], q["answer"])
            if q["stale"]:
                stale = q["stale"].lower()
                assert any(stale in t for t in texts), (h["id"], q["stale"])
                assert not any(stale in t and answer in t for t in texts), (h["id"], q["stale"], q["answer"])


def test_ranks() -> None:
    results = ["user: I sleep best in a window seat", "user: aisle seats from now on", "assistant: noted"]
    assert bench.ranks(results, "Aisle", "window seat") == (2, 1)
    assert bench.ranks(results[1:], "aisle", "window seat") == (1, None)
    assert bench.ranks(results, "Model 3", None) == (None, None)
    # a result naming both values answers and is not stale
    assert bench.ranks(["went from the window seat to the aisle", "window seat"], "aisle", "window seat") == (1, 2)


def test_current_first() -> None:
    assert bench.current_first(1, None)  # no stale result: outranked
    assert bench.current_first(2, 5)
    assert not bench.current_first(3, 1)
    assert not bench.current_first(None, None)  # a missing answer never counts
    assert not bench.current_first(None, 2)


def test_summary() -> None:
    def question(rank: int | None, stale: str | None = None, stale_rank: int | None = None) -> Any:
        return bench.Question("h", "q?", "a", stale, answer_rank=rank, stale_rank=stale_rank)

    questions = [question(1), question(3, "old", 1), question(None, "old", 2), question(7, "old")]
    s = bench.summary(questions)
    assert s["questions"] == 4
    assert s["rank1"] == pytest.approx(0.25)
    assert s["top3"] == pytest.approx(0.5)
    assert s["hit"] == pytest.approx(0.75)
    assert s["mrr"] == pytest.approx((1 + 1 / 3 + 1 / 7) / 4)
    assert s["corrections"] == 3
    assert s["current_over_stale"] == pytest.approx(1 / 3)  # only the last: no stale result at all
    assert bench.summary([question(2)])["current_over_stale"] is None


def test_summary_scores_the_floor_apart_for_questions_no_history_answers() -> None:
    answered = [bench.Question("h", "q?", "a", None, answer_rank=1, related=2, answer_related=True),
                bench.Question("h", "q?", "a", None, answer_rank=2, related=1, answer_related=False)]
    unanswerable = [bench.Question("h", "q?", None, None, related=0),
                    bench.Question("h", "q?", None, None, related=3)]
    s = bench.summary(answered + unanswerable)
    assert s["questions"] == 2 and s["rank1"] == pytest.approx(0.5)  # only the answered count for ranks
    assert s["kept"] == pytest.approx(0.5)
    assert s["unanswerable"] == 2 and s["empty"] == pytest.approx(0.5) and s["shown"] == pytest.approx(1.5)
    assert bench.summary(answered)["empty"] is None


def test_load_names_users_and_orders_sessions(tmp_path: Path) -> None:
    data = {"version": 1, "histories": [{"id": "h/1", "persona": "p", "questions": [
        {"question": "q?", "answer": "x", "stale": None}], "sessions": [
        {"date": "2026-02-01T10:00:00Z", "messages": [{"role": "user", "content": "later"}]},
        {"date": "2026-01-01T10:00:00Z", "messages": [{"role": "user", "content": "earlier"}]}]}]}
    path = tmp_path / "h.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    [h] = bench.load(path, "run")
    assert h.user == "run-h-1"
    assert [s["messages"][0]["content"] for s in h.sessions] == ["earlier", "later"]
    path.write_text(json.dumps({"version": 1, "histories": []}), encoding="utf-8")
    with pytest.raises(ValueError):
        bench.load(path, "run")
