"""Context lines carry their dates, and a slot's replaced values come with the current one, oldest first and marked
(service/search/context.py `histories`, context_format.py `bullet`): the reader of a context is usually an LLM, which
can judge a conflict when it sees dates."""

from __future__ import annotations

from service.core.domain import Memory, Scope
from service.schemas.memories import MemoryRecord
from service.search import context, context_format


def memory(mid: str, content: str, said: str, *, superseded_by: str | None = None, project: str | None = None,
           event_at: str | None = None) -> Memory:
    return Memory(id=mid, user_id="u", content=content, category="personal_fact",
                  scope=Scope.PROJECT if project else Scope.GLOBAL, project_id=project, agent_id=None,
                  metadata={"said_at": said, "event_at": event_at} if event_at else {}, created_at=said,
                  updated_at=said, occurred_at=min(said, event_at or said), superseded_by=superseded_by, hash=mid)


def test_every_line_says_when_it_was_said_and_the_day_of_an_event() -> None:
    plain = MemoryRecord.of(memory("a", "I prefer tabs.", "2026-11-30T09:00:00+00:00"))
    assert context_format.bullet(plain) == "- I prefer tabs. (said 2026-11-30)"
    plan = MemoryRecord.of(memory("b", "Dentist next Friday at 10am.", "2026-12-04T08:00:00+00:00", project="home",
                                  event_at="2026-12-11T10:00:00+00:00"))
    assert context_format.bullet(plan) == "- Dentist next Friday at 10am. [home] (said 2026-12-04, for 2026-12-11)"
    moved = MemoryRecord.of(memory("c", "We moved to Porto last weekend.", "2026-12-05T18:00:00+00:00",
                                   event_at="2026-11-28T00:00:00+00:00"))
    assert moved.occurred_at is not None and moved.occurred_at.startswith("2026-11-28")  # the day it happened
    assert context_format.bullet(moved) == "- We moved to Porto last weekend. (said 2026-12-05, happened 2026-11-28)"


def test_a_slot_shows_its_values_oldest_first_with_the_current_one_marked() -> None:
    lisbon = memory("l", "I live in Lisbon, near the river.", "2026-11-30T09:00:00+00:00", superseded_by="b")
    braga = memory("b", "I live in Braga for the winter.", "2026-12-01T09:00:00+00:00", superseded_by="p")
    porto = memory("p", "Big news: we moved to Porto last weekend!", "2026-12-05T18:00:00+00:00")
    other = memory("o", "My sister lives in Lyon.", "2026-12-02T09:00:00+00:00")
    past = context.histories([porto, lisbon, other, braga])
    assert list(past) == ["p"] and [m.id for m in past["p"]] == ["l", "b"]  # through the chain, oldest first
    line = context_format.bullet(MemoryRecord.of(porto), [MemoryRecord.of(m) for m in past["p"]])
    assert line == ("- I live in Lisbon, near the river. (said 2026-11-30) → I live in Braga for the winter. "
                    "(said 2026-12-01) → Big news: we moved to Porto last weekend! (said 2026-12-05, current)")


def test_a_long_history_keeps_its_newest_values() -> None:
    chain = [memory(f"v{i}", f"value {i}", f"2026-11-{10 + i}T00:00:00+00:00", superseded_by=f"v{i + 1}")
             for i in range(6)]
    chain.append(memory("v6", "value 6", "2026-11-20T00:00:00+00:00"))
    past = context.histories(chain)
    assert [m.id for m in past["v6"]] == ["v3", "v4", "v5"] and len(past["v6"]) == context.HISTORY_KEPT


def test_mcp_recall_gives_the_day_said_and_the_day_of_the_event() -> None:
    from service.mcp.tools import recall_answer
    from service.schemas.search import SearchResponse, SearchResult

    def result(mid: str, metadata: dict[str, str]) -> SearchResult:
        return SearchResult(id=mid, content="Dentist next Friday at 10am.", score=1.0, source="vector",
                            category="task_context", scope=None, project_id=None,
                            created_at="2026-12-07T10:00:00+00:00", occurred_at="2026-12-04T08:00:00+00:00",
                            metadata=metadata)

    plan = result("p", {"said_at": "2026-12-04T08:00:00+00:00", "event_at": "2026-12-11T10:00:00+00:00"})
    plain = result("q", {})
    rows = recall_answer(SearchResponse(results=[plan, plain]), "compact")["results"]
    assert (rows[0]["date"], rows[0]["event_date"]) == ("2026-12-04", "2026-12-11")
    assert rows[1]["date"] == "2026-12-04" and "event_date" not in rows[1]
