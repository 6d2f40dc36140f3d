"""The summary prompts every LLM provider shares: a conversation's summary (service/conversations/summary.py) and a
community's (service/graph_api/communities.py), each answered as JSON `{"summary": "..."}` and checked here."""

from __future__ import annotations

from pydantic import BaseModel, Field

MAX_INPUT_CHARS = 24_000  # of "role: content" lines, as the extractor's window
MAX_SUMMARY_CHARS = 1500

SUMMARY_INSTRUCTION = """\
You summarise a conversation between a user and an AI assistant for the assistant's future sessions.
Write at most {sentences} plain sentences: what was asked, what was decided or done, what is still open, the
names, numbers and dates that matter. Use only what the conversation says; do not address the reader.
Answer only with JSON matching the response schema."""


class SummaryResponse(BaseModel):
    summary: str = Field(description="The summary, at most the requested number of sentences.")


def conversation_prompt(messages: list[tuple[str, str]]) -> str:
    """The conversation as `role: content` lines, the first MAX_INPUT_CHARS characters."""
    lines, used = [], 0
    for role, content in messages:
        line = f"{role}: {' '.join(content.split())}"
        if used + len(line) > MAX_INPUT_CHARS:
            lines.append(line[: max(0, MAX_INPUT_CHARS - used)])
            break
        lines.append(line)
        used += len(line) + 1
    return "Conversation:\n" + "\n".join(lines)


def clip_summary(summary: str) -> str:
    """One line of at most MAX_SUMMARY_CHARS characters."""
    summary = " ".join(summary.split())
    return summary if len(summary) <= MAX_SUMMARY_CHARS else summary[: MAX_SUMMARY_CHARS - 1].rstrip() + "…"


COMMUNITY_INSTRUCTION = (
    "You summarise one community of a person's knowledge graph: a group of entities that are related to each other. "
    "Write one or two plain sentences (at most 60 words) saying what ties the group together, using only the "
    "entities and facts given. Answer as JSON {\"summary\": \"...\"}."
)
MAX_COMMUNITY_FACTS = 30


class CommunityAnswer(BaseModel):
    summary: str = Field(min_length=1, max_length=1000)


def community_prompt(members: list[tuple[str, str]], facts: list[str]) -> str:
    """`members`: (name, type), best connected first; `facts`: the sentences of relations inside the group."""
    return "ENTITIES\n" + "\n".join(f"- {n} ({t})" for n, t in members) + "\n\nFACTS\n" + "\n".join(
        f"- {f}" for f in facts[:MAX_COMMUNITY_FACTS])
