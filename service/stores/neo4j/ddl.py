"""The graph's schema statements: constraints and indexes of memories, entities and facts, of the runs,
conversations and communities tiers, and the full-text index names the reads use. Statements only; start-up
runs them (schema.py, `GraphSchema.ensure_schema`)."""

from __future__ import annotations

from typing import LiteralString

ENTITY_TEXT_INDEX = "entity_text"
FACT_TEXT_INDEX = "relates_text"

SCHEMA: tuple[LiteralString, ...] = (
    "CREATE CONSTRAINT memory_id IF NOT EXISTS FOR (m:Memory) REQUIRE m.id IS UNIQUE",
    "CREATE CONSTRAINT entity_id IF NOT EXISTS FOR (e:Entity) REQUIRE e.id IS UNIQUE",
    "CREATE INDEX memory_user IF NOT EXISTS FOR (m:Memory) ON (m.user_id, m.scope, m.project_id)",
    "CREATE INDEX memory_hash IF NOT EXISTS FOR (m:Memory) ON (m.hash)",
    "CREATE INDEX entity_user IF NOT EXISTS FOR (e:Entity) ON (e.user_id, e.group_id)",
    "CREATE INDEX entity_name IF NOT EXISTS FOR (e:Entity) ON (e.user_id, e.name_lc)",
    "CREATE INDEX relates_id IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.id)",
    # Flat write cost: a relation is found by its unique key (the id of the original edge; a merge's
    # copies share the id but have no key), the live edges of one (subject, predicate) by `slot`, which only
    # live edges carry, and what one call expired by `expired_at`; never by walking a node's relationships.
    # Relationship property uniqueness constraints exist in Community since 5.7.
    "CREATE CONSTRAINT relates_key IF NOT EXISTS FOR ()-[r:RELATES]-() REQUIRE r.key IS UNIQUE",
    "CREATE INDEX relates_slot IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.slot)",
    "CREATE INDEX relates_expired IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.expired_at)",
    "CREATE INDEX relates_user IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.user_id)",
    # cursor pagination: equality on the user, range + order on the id
    "CREATE INDEX memory_user_id IF NOT EXISTS FOR (m:Memory) ON (m.user_id, m.id)",
    "CREATE INDEX entity_user_id IF NOT EXISTS FOR (e:Entity) ON (e.user_id, e.id)",
    "CREATE INDEX relates_user_id IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.user_id, r.id)",
    # entity curation and traces (curation.py)
    "CREATE INDEX entity_merged IF NOT EXISTS FOR (e:Entity) ON (e.merged_into)",
    "CREATE INDEX entity_merged_via IF NOT EXISTS FOR (e:Entity) ON (e.merged_via)",
    # an unmerge finds a merge's copies by these (only copies carry the property), not by walking the target
    "CREATE INDEX mentions_live IF NOT EXISTS FOR ()-[r:MENTIONS]-() ON (r.live_of)",
    "CREATE INDEX relates_migrated IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.migrated_from)",
    "CREATE INDEX mentions_migrated IF NOT EXISTS FOR ()-[r:MENTIONS]-() ON (r.migrated_from)",
    "CREATE INDEX same_as_migrated IF NOT EXISTS FOR ()-[r:SAME_AS]-() ON (r.migrated_from)",
    "CREATE INDEX touched_migrated IF NOT EXISTS FOR ()-[r:TOUCHED]-() ON (r.migrated_from)",
    "CREATE CONSTRAINT trace_id IF NOT EXISTS FOR (t:Trace) REQUIRE t.id IS UNIQUE",
    "CREATE INDEX trace_user IF NOT EXISTS FOR (t:Trace) ON (t.user_id, t.at)",
    "CREATE INDEX trace_expiry IF NOT EXISTS FOR (t:Trace) ON (t.expires_at)",
    # full-text (Lucene, analyzer standard-no-stop-words); 5.26 indexes LIST<STRING> (aliases) too.
    # invalid_at/expired_at are in the edge index only so a query can exclude history inside
    # Lucene (`-expired_at:[* TO *]`), before the index applies its limit.
    "CREATE FULLTEXT INDEX entity_text IF NOT EXISTS FOR (e:Entity) ON EACH [e.name, e.aliases, e.ft_key]",
    "CREATE FULLTEXT INDEX relates_text IF NOT EXISTS FOR ()-[r:RELATES]-() "
    "ON EACH [r.fact, r.ft_key, r.invalid_at, r.expired_at]",
)

RUN_SCHEMA: tuple[LiteralString, ...] = (
    "CREATE CONSTRAINT run_uid IF NOT EXISTS FOR (r:Run) REQUIRE r.uid IS UNIQUE",
    "CREATE CONSTRAINT step_uid IF NOT EXISTS FOR (s:Step) REQUIRE s.uid IS UNIQUE",
    "CREATE CONSTRAINT tool_call_uid IF NOT EXISTS FOR (t:ToolCall) REQUIRE t.uid IS UNIQUE",
    "CREATE INDEX run_user IF NOT EXISTS FOR (r:Run) ON (r.user_id, r.created_at)",
    "CREATE INDEX step_run IF NOT EXISTS FOR (s:Step) ON (s.run_uid)",
    "CREATE INDEX tool_call_run IF NOT EXISTS FOR (t:ToolCall) ON (t.run_uid)",
    "CREATE FULLTEXT INDEX run_text IF NOT EXISTS FOR (r:Run) ON EACH [r.task, r.summary, r.error_kind, r.ft_key]",
    "CREATE FULLTEXT INDEX tool_call_text IF NOT EXISTS FOR (t:ToolCall) "
    "ON EACH [t.tool, t.arguments, t.error, t.error_kind, t.ft_key]",
)

CONVERSATION_SCHEMA: tuple[LiteralString, ...] = (
    "CREATE CONSTRAINT conversation_uid IF NOT EXISTS FOR (c:Conversation) REQUIRE c.uid IS UNIQUE",
    "CREATE CONSTRAINT message_uid IF NOT EXISTS FOR (m:Message) REQUIRE m.uid IS UNIQUE",
    "CREATE INDEX conversation_user IF NOT EXISTS FOR (c:Conversation) ON (c.user_id, c.updated_at)",
    "CREATE INDEX message_session IF NOT EXISTS FOR (m:Message) ON (m.session_uid, m.ord)",
    "CREATE INDEX message_user IF NOT EXISTS FOR (m:Message) ON (m.user_id)",
    "CREATE FULLTEXT INDEX message_text IF NOT EXISTS FOR (m:Message) ON EACH [m.content, m.ft_key]",
)

COMMUNITY_SCHEMA: tuple[LiteralString, ...] = (
    "CREATE CONSTRAINT community_id IF NOT EXISTS FOR (c:Community) REQUIRE c.id IS UNIQUE",
    "CREATE INDEX community_user IF NOT EXISTS FOR (c:Community) ON (c.user_id)",
)
