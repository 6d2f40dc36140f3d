"""What the prompt shows of the user's stored memories, and which of the model's `replaces` count."""

from __future__ import annotations

from service.ai.extraction import ExtractedFact, KnownMemory, Message
from service.ai.llm.prompts import labels, render_conversation
from service.ai.llm.validation import resolve_replaces, validate_item

KNOWN = [KnownMemory(id="id-lisbon", content="I live in Lisbon,\n near the river.", said="2026-11-30"),
         KnownMemory(id="id-tom", content="My manager is Tom Becker.", said=None)]


def test_the_prompt_labels_the_known_memories_and_never_shows_their_ids() -> None:
    prompt = render_conversation([Message(role="user", content="We moved to Porto!")], None, known=KNOWN)
    assert "[m1] I live in Lisbon, near the river. (said 2026-11-30)" in prompt
    assert "[m2] My manager is Tom Becker. (said unknown)" in prompt
    assert "id-lisbon" not in prompt and prompt.index("Known memories") < prompt.index("Conversation:")
    assert "Known memories" not in render_conversation([Message(role="user", content="hi")], None)
    assert labels(KNOWN) == {"m1": "id-lisbon", "m2": "id-tom"}


def test_only_shown_labels_become_ids() -> None:
    item = {"content": "The user lives in Porto.", "category": "personal_fact", "scope": "global",
            "source_messages": [0], "replaces": ["m1", "[m2]", "m9", "5f0c-other-users-id", 7, None]}
    fact, dropped = validate_item(item, None, "model", range(0, 1))
    assert fact is not None and dropped == 0
    none = ExtractedFact(content="The user likes the beach.", category="preference")
    resolve_replaces([fact, none], labels(KNOWN), provider="openai", model="model")
    assert fact.replaces == ["id-lisbon", "id-tom"]  # m9, an id and a number were not shown: ignored
    assert none.replaces == []
