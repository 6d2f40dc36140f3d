"""The extraction prompt shared by every LLM provider: system instruction, conversation rendering and the
response schema.

One module so the wording, the examples and the schema the model must answer in change together.
Gemini gets the schema as structured output (`response_schema`), an OpenAI-compatible server as
`response_format` json_schema (service/ai/openai/); the answer is still validated item by item against
`service.ai.extraction.ExtractedFact` (service/ai/llm/validation.py) before anything is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from service.ai.extraction import KnownMemory, Message
from service.core.domain import CATEGORIES

PROMPT_VERSION = "2025-2"

# 1-2 examples per category; keys must be exactly the 13 domain categories (checked below).
CATEGORY_EXAMPLES: dict[str, tuple[str, ...]] = {
    "preference": (
        "User prefers dark mode in every editor.",
        "User dislikes ORMs and prefers writing raw SQL.",
    ),
    "personal_fact": (
        "User lives in Lisbon.",
        "User's name is Dana and they are a backend engineer at Acme.",
    ),
    "technical_skill": (
        "User is experienced with Rust and async Tokio code.",
        "User knows how to tune PostgreSQL query plans.",
    ),
    "domain_knowledge": (
        "In EU payroll, employer social contributions are paid monthly.",
        "User explained that HL7 FHIR resources are versioned per server.",
    ),
    "tech_stack": (
        "The project uses FastAPI, Qdrant and Neo4j.",
        "The project's frontend is built with SvelteKit.",
    ),
    "convention": (
        "The project uses snake_case for all database column names.",
        "Commit messages in the project follow Conventional Commits.",
    ),
    "architecture": (
        "The project writes asynchronously: the API enqueues jobs and an ARQ worker processes them.",
        "The project keeps vectors in Qdrant and the temporal knowledge graph in Neo4j.",
    ),
    "dependency": (
        "The project pins pydantic to 2.x because of the settings module.",
        "The project depends on google-genai 3.3.0.",
    ),
    "decision": (
        "User decided to replace Celery with ARQ because Celery was too heavy for the worker.",
        "The team chose Qdrant over pgvector for filtered search performance.",
    ),
    "interaction": (
        "User debugged a Neo4j connection timeout with the assistant on 2025-03-02.",
        "User asked for a code review of the ingestion worker.",
    ),
    "workflow": (
        "User writes tests before the implementation.",
        "User always runs ruff and mypy before committing.",
    ),
    "procedure": (
        "To release: bump the version, tag the commit, then run scripts/release.sh.",
        "To reset the local stack: docker compose down -v, then docker compose up -d.",
    ),
    "task_context": (
        "User is currently migrating the search endpoint to hybrid retrieval.",
        "User is working on the Gemini fallback logic this week.",
    ),
}

if set(CATEGORY_EXAMPLES) != set(CATEGORIES):  # pragma: no cover - guards edits to either list
    raise RuntimeError("CATEGORY_EXAMPLES must cover exactly the categories in service.core.domain.CATEGORIES")


def _category_section() -> str:
    lines: list[str] = []
    for name, info in CATEGORIES.items():
        scope = {"global": "global", "project": "project", "flexible": "project if about the project, else global"}[
            info.default_scope
        ]
        lines.append(f"- {name} ({info.group}; default scope: {scope}): {info.description}.")
        lines.extend(f'    e.g. "{example}"' for example in CATEGORY_EXAMPLES[name])
    return "\n".join(lines)


SYSTEM_INSTRUCTION = f"""\
You extract long-term memories from a conversation between a user and an AI assistant.
The memories are stored and shown to future assistants, so every fact must be true, useful later and
stated in the conversation. Answer only with JSON matching the response schema.

WHAT TO EXTRACT
- Only facts about the user, their work or their project that the conversation states: what the user
  says, and what the user confirms or accepts from the assistant.
- Nothing from assistant speculation, suggestions the user did not accept, questions, hypotheticals,
  examples, greetings or small talk. Nothing from general world knowledge the user did not state.
- Tool output and system messages count only where they state a fact about the user's project
  (e.g. a version in a lock file the user is working on).
- One fact per item, self-contained and short (one sentence), written in the third person:
  "User prefers tabs", not "I prefer tabs". Resolve pronouns and "it"/"this" to names.
- Do not repeat the same fact twice. If nothing is worth remembering, return {{"facts": []}}.

CATEGORIES (use exactly one of these names)
{_category_section()}

SCOPE
- "global": true about the user everywhere (preferences, personal facts, skills, knowledge).
- "project": true only inside the current project (stack, conventions, architecture, dependencies,
  and project-specific decisions, workflows, procedures and tasks).
- If no project is given, use "global" for every fact.

ENTITIES
- List the named things a fact is about: people, organisations, projects, tools, languages,
  libraries, services, files, places, concepts. Use their canonical name ("PostgreSQL", not "postgres db").
- type is one lowercase word of this vocabulary (docs/graph.md): person, organization, place, project,
  tool, language, framework, library, database, service, concept, event, file, or thing.
- role: what the conversation says the entity is, as a short noun phrase ("plumber", "VP of Sales",
  "climbing gym"), or null when it does not say. Two people with one name are told apart by it.
- The user is the entity "user" with type "person".

RELATIONS
- subject -> predicate -> object triples between entities of the fact, with the fact sentence in "fact".
- predicate is a short snake_case verb phrase, e.g. prefers, dislikes, uses, works_at, lives_in,
  knows, depends_on, decided, replaced_by, part_of, located_in, is_working_on.
- For first-person facts the subject is "user": "I work at Acme" -> user works_at Acme.
- Settings that hold ONE value at a time use these exact predicates, so a newer value replaces the
  older one: is_named, works_at, lives_in, has_timezone (object e.g. "Europe/Berlin"),
  uses_indentation (object "tabs" or "<n> spaces"), uses_database (project -> its primary
  database), deploys_to (project -> its deployment target).
- Only relations the fact states; none is fine.

SOURCES
- Each message starts with "[n] role". source_messages lists the n of every message the fact
  was stated, confirmed or accepted in (at least one; e.g. [0, 3] when message 3 confirms message 0).

TIME
- valid_at: when the fact became true, as an ISO 8601 date (YYYY-MM-DD) or datetime, only when the
  conversation states or dates it (a message timestamp with "today", "since March 2024" -> "2024-03-01").
  Otherwise null. Never guess.

REPLACES
- When "Known memories" are listed, they are what is stored about this user now, each with a label [m1], [m2], ...
- replaces lists the labels of the known memories a fact makes out of date: the same thing about the same
  subject with a newer value ("We moved to Porto" replaces "I live in Lisbon"; "My manager is Sarah now"
  replaces "My manager is Tom"). Not a memory about another person or another thing, not one that still holds.
- Use only the labels shown. [] when the fact replaces nothing, which is the usual case.
"""


TRUNCATED = " [...truncated]"


def render_message(index: int, message: Message, max_chars: int | None = None) -> str:
    """One message as a prompt line, "[index] role: text" (the index is what `source_messages` names);
    cut to `max_chars` (with a marker) when given and too long."""
    header = f"[{index}] {message.role}"
    if message.timestamp:
        header += f" @ {message.timestamp}"
    content = message.content
    if max_chars is not None and len(header) + 2 + len(content) > max_chars:
        keep = max(0, max_chars - len(header) - 2 - len(TRUNCATED))
        content = content[:keep] + TRUNCATED
    return f"{header}: {content}"


def labels(known: Sequence[KnownMemory]) -> dict[str, str]:
    """The label the prompt shows for each known memory ("m1", ...) -> its id: the model names only labels."""
    return {f"m{i + 1}": k.id for i, k in enumerate(known)}


def render_conversation(
    messages: Sequence[Message],
    project_id: str | None = None,
    *,
    start_index: int = 0,
    max_message_chars: int | None = None,
    known: Sequence[KnownMemory] = (),
) -> str:
    """The user turn of one extraction call: the project context, the user's stored memories the window may change
    (`known`, labelled m1, m2, ...), and a window of messages."""
    project = f"Project: {project_id}" if project_id else 'Project: none (use scope "global")'
    lines = [render_message(start_index + i, m, max_message_chars) for i, m in enumerate(messages)]
    stored = ""
    if known:
        stored = "Known memories (label: content, when said):\n" + "\n".join(
            f"[{label}] {' '.join(k.content.split())} (said {k.said or 'unknown'})"
            for label, k in zip(labels(known), known, strict=True)) + "\n\n"
    return (
        f"{project}\n\n{stored}Conversation:\n"
        + "\n".join(lines)
        + "\n\nExtract the facts worth remembering from this conversation."
    )


# --------------------------------------------------------------------------------------------
# Response schema (structured output). Loose on purpose: the strict checks live in
# service.ai.extraction, so one bad item is dropped instead of the whole answer failing.
# --------------------------------------------------------------------------------------------


class SchemaEntity(BaseModel):
    model_config = ConfigDict(title="Entity")

    name: str = Field(description="Canonical name; the user is 'user'.")
    type: str = Field(description="One lowercase word: person, organization, place, project, tool, language, ...")
    role: str | None = Field(default=None, description="What the conversation says it is, a short noun phrase "
                             "('plumber', 'VP of Sales', 'climbing gym'), else null.")


class SchemaRelation(BaseModel):
    model_config = ConfigDict(title="Relation")

    subject: str = Field(description="Entity name; 'user' for first-person facts.")
    predicate: str = Field(description="snake_case verb phrase, e.g. prefers, uses, works_at, depends_on.")
    object: str = Field(description="Entity name.")
    fact: str = Field(description="The sentence that states the relation.")


class SchemaFact(BaseModel):
    model_config = ConfigDict(title="Fact")

    content: str = Field(description="One self-contained sentence in the third person.")
    category: str = Field(description="One of the 13 category names.", json_schema_extra={"enum": list(CATEGORIES)})
    scope: Literal["global", "project"] = Field(description="'project' only when a project is given.")
    entities: list[SchemaEntity] = Field(description="Named things the fact is about.")
    relations: list[SchemaRelation] = Field(description="subject-predicate-object triples the fact states.")
    valid_at: str | None = Field(default=None, description="ISO 8601 date when stated, else null.")
    source_messages: list[int] = Field(description="The [n] indexes of the messages the fact comes from.")
    replaces: list[str] = Field(default_factory=list, description=(
        "Labels ([m1], ...) of the known memories this fact makes out of date (a newer value of the same thing "
        "about the same subject); [] when none."))


class ExtractionResponse(BaseModel):
    """What the model must answer: `{"facts": [...]}`."""

    model_config = ConfigDict(title="ExtractionResponse")

    facts: list[SchemaFact]


RESPONSE_SCHEMA: type[BaseModel] = ExtractionResponse
