"""The arguments of the MCP graph tools (search, duplicates, review, merge, structured writes, facts, structural
queries); their fields and docstrings are what the agent reads."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from service.graph_api.vocabulary import ENTITY_TYPES
from service.mcp.args import EntityIdArg, ProjectId, Query, UserId, Wait


class GraphSearchArgs(BaseModel):
    """Facts from the temporal knowledge graph ('user works_at Acme Corp', since when, until when)."""

    query: Query
    user_id: UserId
    project_id: ProjectId = None
    limit: Annotated[int, Field(ge=1, le=100, description="At most this many facts.")] = 10
    include_history: Annotated[
        bool, Field(description="Also facts no longer true.")
    ] = False


class DuplicatesArgs(BaseModel):
    """Entity pairs that may be one thing ("Mel" / "Melanie") which the resolution gate left for review, highest
    score first, each with both entities (name, type, aliases, roles) and the gate's reason. Decide with
    review_duplicate."""

    user_id: UserId
    project_id: ProjectId = None
    limit: Annotated[int, Field(ge=1, le=500, description="Page size.")] = 20
    cursor: Annotated[str | None, Field(max_length=200, description="next_cursor of the previous page.")] = None


class ReviewArgs(BaseModel):
    """Decide a pair from list_duplicate_entities. Only confirm when the memories make it clear that both
    names denote the same thing; a merge can be undone, but ask the user when unsure."""

    user_id: UserId
    source_id: EntityIdArg
    target_id: EntityIdArg
    confirm: Annotated[bool, Field(description="true: they are one entity (source merges into target); "
                                               "false: they differ (never proposed again).")]


class MergeArgs(BaseModel):
    """Merge two entities of the user's graph the user said are one (same group and compatible types only):
    the source's name becomes an alias of the target and the target gains its mentions and facts.
    Reversible with POST /v1/graph/entities/{source_id}/unmerge."""

    user_id: UserId
    source_id: EntityIdArg
    target_id: EntityIdArg


EntityName = Annotated[str, Field(min_length=1, max_length=200,
                                  description="An entity's name (an existing entity is found by name or alias).")]
EntityTypeArg = Annotated[str, Field(min_length=1, max_length=64, description=(
    f"Its type, one of: {', '.join(ENTITY_TYPES)} (a synonym such as company or city is mapped)."))]
PredicateArg = Annotated[str, Field(min_length=1, max_length=100, description=(
    "How the subject relates to the object, e.g. works_at, uses, lives_in, prefers, depends_on, decided "
    "(free text is normalised: 'works for' -> works_at)."))]
ValidAt = Annotated[str | None, Field(max_length=64, description="Since when it is true (ISO 8601); default: now.")]


class AddEntityArgs(BaseModel):
    """Tell the knowledge graph about an entity (a person, organization, project, tool...). It goes through
    entity resolution: the result says whether it was created, merged into an entity the graph already had,
    left pending review, or already existing, with the entity id."""

    user_id: UserId
    name: EntityName
    type: EntityTypeArg = "thing"
    aliases: Annotated[list[str], Field(max_length=20, description="Other names of it.")] = []
    description: Annotated[str | None, Field(max_length=2000, description="What it is, in a sentence.")] = None
    project_id: ProjectId = None
    wait: Wait = False


class AddRelationshipArgs(BaseModel):
    """Relate two entities of the knowledge graph (by name; new names go through entity resolution), with an
    optional confidence. A newer value of a single-valued relation (works_at, lives_in...) replaces the older."""

    user_id: UserId
    source: EntityName
    predicate: PredicateArg
    target: EntityName
    source_type: EntityTypeArg = "thing"
    target_type: EntityTypeArg = "thing"
    confidence: Annotated[float | None, Field(ge=0, le=1, description="How sure, 0 to 1.")] = None
    valid_at: ValidAt = None
    project_id: ProjectId = None
    wait: Wait = False


class AddFactArgs(BaseModel):
    """Store a subject-predicate-object fact in the knowledge graph, e.g. Alice works_at Acme. A newer value of
    a single-valued predicate (works_at, lives_in...) replaces the older one, which stays as history."""

    user_id: UserId
    subject: EntityName
    predicate: PredicateArg
    object: EntityName
    subject_type: EntityTypeArg = "thing"
    object_type: EntityTypeArg = "thing"
    valid_at: ValidAt = None
    project_id: ProjectId = None
    wait: Wait = False


class FactsAboutArgs(BaseModel):
    """Everything the knowledge graph holds about one entity (by name or alias; merged names too): its facts in
    both directions, current ones first, then history with valid_at / invalid_at."""

    user_id: UserId
    name: EntityName
    project_id: ProjectId = None
    include_history: Annotated[bool, Field(description="Also facts that are no longer true.")] = True
    limit: Annotated[int, Field(ge=1, le=500, description="At most this many facts.")] = 50


class QueryGraphArgs(BaseModel):
    """Structural questions over typed relations, which similarity search cannot answer: "which projects use
    knowledge graphs" = subject_type project, predicate uses, object "knowledge graphs"; "who works at Acme" =
    predicate works_at, object Acme. Every field given must hold."""

    user_id: UserId
    subject: Annotated[str | None, Field(max_length=200, description="The subject's name.")] = None
    subject_type: Annotated[str | None, Field(max_length=64, description="The subject's entity type.")] = None
    predicate: Annotated[str | None, Field(max_length=100, description="The relation, e.g. uses, works_at.")] = None
    object: Annotated[str | None, Field(max_length=200, description="The object's name.")] = None
    object_type: Annotated[str | None, Field(max_length=64, description="The object's entity type.")] = None
    as_of: Annotated[str | None, Field(max_length=64, description="Facts true at this time (ISO 8601); "
                                                                  "default: the current ones.")] = None
    project_id: ProjectId = None
    limit: Annotated[int, Field(ge=1, le=500, description="At most this many facts.")] = 50
