"""Conversations in Neo4j: `(:Conversation)-[:HAS_MESSAGE]->(:Message)`, the short-term tier.

A conversation's `uid` is uuid5(user, session id); a message's is uuid5(user, session, its id) when the client
names it (a message sent again is stored once), else uuid5(task, position). Messages are ordered by `ord`:
the write's acceptance time, then the position in the write. A deleted session keeps a tombstone, so a write
accepted before the delete and run after it stores nothing. `ConversationGraph` is the `ConversationStore` part;
a delete of everything of a user erases their sessions here, and their runs and traces through the backend's
`erase_tiers` (store.py).
"""

from __future__ import annotations

import uuid
from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction

from service.core.domain import ID_NAMESPACE
from service.stores.neo4j.ceiling import Ceiling
from service.stores.neo4j.executor import Neo4jExecutor
from service.stores.neo4j.rows import MAX_PAGE_LIMIT, check_id, clamp, ft_key
from service.stores.neo4j.search import lucene_query, lucene_terms

FT_GROUP = "messages"  # the tenant token of message documents: ft_key(user, FT_GROUP)


MERGE_CONVERSATION: LiteralString = """
MERGE (c:Conversation {uid: $uid})
ON CREATE SET c.id = $session_id, c.user_id = $user_id, c.created_at = $accepted_at, c.updated_at = $accepted_at
WITH c
WHERE c.deleted_at IS NULL OR c.deleted_at < $accepted_at OR $restore
SET c.created_at = CASE WHEN c.deleted_at IS NOT NULL OR $accepted_at < c.created_at THEN $accepted_at
                        ELSE c.created_at END,
    c.updated_at = CASE WHEN c.deleted_at IS NOT NULL OR $accepted_at > c.updated_at THEN $accepted_at
                        ELSE c.updated_at END,
    c.project_id = coalesce($project_id, c.project_id)
REMOVE c.deleted_at
RETURN c.uid AS uid
"""

MESSAGES: LiteralString = """
MATCH (c:Conversation {uid: $uid})
UNWIND $rows AS row
MERGE (m:Message {uid: row.uid})
ON CREATE SET m.id = row.id, m.user_id = $user_id, m.session_uid = $uid, m.ord = row.ord, m.role = row.role,
              m.content = row.content, m.timestamp = row.timestamp, m.task_id = row.task_id,
              m.created_at = $accepted_at, m.memory_ids = [], m.session_id = $session_id, m.position = row.position
SET m.ft_key = $ft_key,
    m.memory_ids = reduce(acc = m.memory_ids, i IN row.memory_ids | CASE WHEN i IN acc THEN acc ELSE acc + i END)
MERGE (c)-[:HAS_MESSAGE]->(m)
RETURN count(m) AS n
"""

SESSION_PROPS: LiteralString = """c{session_id: c.id, .project_id, .created_at, .updated_at,
    message_count: COUNT { (c)-[:HAS_MESSAGE]->(:Message) }}"""

SESSIONS: LiteralString = """
MATCH (c:Conversation) WHERE c.user_id = $user_id AND c.deleted_at IS NULL
  AND ($project_id IS NULL OR c.project_id = $project_id)
  AND ($cursor = '' OR c.updated_at + '|' + c.id < $cursor)
WITH c ORDER BY c.updated_at DESC, c.id DESC LIMIT $limit
RETURN """ + SESSION_PROPS + " AS session"

SESSION: LiteralString = """
MATCH (c:Conversation {uid: $uid}) WHERE c.user_id = $user_id AND c.deleted_at IS NULL
RETURN """ + SESSION_PROPS + " AS session"

PAGE: LiteralString = """
MATCH (m:Message {session_uid: $uid}) WHERE m.user_id = $user_id AND m.ord > $cursor
WITH m ORDER BY m.ord LIMIT $limit
RETURN m{.id, .role, .content, .timestamp, .task_id, .memory_ids, .created_at, .ord, .position} AS message
"""

SEARCH: LiteralString = """
CALL db.index.fulltext.queryNodes('message_text', $lucene, {limit: $k}) YIELD node AS m, score
WHERE m.user_id = $user_id
MATCH (c:Conversation {uid: m.session_uid}) WHERE c.deleted_at IS NULL
  AND ($project_id IS NULL OR c.project_id IS NULL OR c.project_id = $project_id)
RETURN m{.id, .role, .content, .timestamp, .task_id, .memory_ids, .created_at, session_id: c.id} AS message, score
ORDER BY score DESC
"""

DELETE_SESSION: LiteralString = """
MATCH (c:Conversation {uid: $uid}) WHERE c.user_id = $user_id AND c.deleted_at IS NULL AND c.created_at <= $before
CALL (c) {
    MATCH (m:Message {session_uid: c.uid}) DETACH DELETE m
}
SET c = {uid: c.uid, id: c.id, user_id: c.user_id, created_at: c.created_at, deleted_at: $before}
RETURN count(c) AS n
"""

SESSIONS_BEFORE: LiteralString = """
MATCH (c:Conversation) WHERE c.user_id = $user_id AND c.deleted_at IS NULL AND c.created_at <= $before
RETURN c.uid AS uid LIMIT 1000
"""

EXPIRE_MESSAGES: LiteralString = """
MATCH (m:Message) WHERE m.created_at < $before AND ($user_id IS NULL OR m.user_id = $user_id)
WITH m LIMIT 1000
DETACH DELETE m
RETURN count(*) AS n
"""

# A session whose messages all expired goes too (no tombstone: nothing of it may still be in flight).
EMPTY_SESSIONS: LiteralString = """
MATCH (c:Conversation) WHERE c.deleted_at IS NULL AND c.updated_at < $before
  AND ($user_id IS NULL OR c.user_id = $user_id) AND NOT (c)-[:HAS_MESSAGE]->(:Message)
WITH c LIMIT 1000
DETACH DELETE c
RETURN count(*) AS n
"""

ERASE_OF_MEMORIES: LiteralString = """
MATCH (m:Message) WHERE m.user_id = $user_id AND any(i IN m.memory_ids WHERE i IN $ids)
WITH m LIMIT 1000
DETACH DELETE m
RETURN count(*) AS n
"""


def conversation_uid(user_id: str, session_id: str) -> str:
    return uuid.uuid5(ID_NAMESPACE, f"conversation|{user_id}|{session_id}").hex


def message_uid(user_id: str, session_id: str, message_id: str | None, task_id: str, position: int) -> str:
    key = f"message|{user_id}|{session_id}|{message_id}" if message_id else f"message|{task_id}|{position}"
    return uuid.uuid5(ID_NAMESPACE, key).hex


class ConversationGraph:
    """Conversations (`ConversationStore`)."""

    def __init__(self, executor: Neo4jExecutor) -> None:
        self._exec = executor
        self._ceiling = Ceiling(executor)

    async def store_messages(self, user_id: str, session_id: str, project_id: str | None, accepted_at: str,
                             rows: list[dict[str, Any]], restore: bool = False) -> int:
        check_id(user_id, "user_id")
        check_id(session_id, "session_id")
        uid = conversation_uid(user_id, session_id)

        rows = [{**r, "uid": message_uid(user_id, session_id, r.get("id"), str(r["task_id"]), int(r["position"]))}
                for r in rows]

        async def run(tx: AsyncManagedTransaction) -> int:
            live = await (await tx.run(MERGE_CONVERSATION, uid=uid, session_id=session_id, user_id=user_id,
                                       project_id=project_id, accepted_at=accepted_at, restore=restore)).single()
            if live is None:
                return 0
            rec = await (await tx.run(MESSAGES, uid=uid, user_id=user_id, rows=rows, accepted_at=accepted_at,
                                      session_id=session_id, ft_key=ft_key(user_id, FT_GROUP))).single()
            return int(rec["n"]) if rec else 0

        stored: int = await self._exec.write(run)
        return stored

    async def list_sessions(self, user_id: str, project_id: str | None, limit: int,
                            cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        check_id(user_id, "user_id")
        n = clamp(limit, MAX_PAGE_LIMIT)

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            result = await tx.run(SESSIONS, user_id=user_id, project_id=project_id, cursor=cursor or "", limit=n + 1)
            return [dict(r["session"]) for r in await result.data()]

        rows: list[dict[str, Any]] = await self._exec.read(run)
        more = len(rows) > n
        rows = rows[:n]
        return rows, (f"{rows[-1]['updated_at']}|{rows[-1]['session_id']}" if more and rows else None)

    async def session(self, user_id: str, session_id: str) -> dict[str, Any] | None:
        check_id(user_id, "user_id")

        async def run(tx: AsyncManagedTransaction) -> dict[str, Any] | None:
            rec = await (await tx.run(SESSION, uid=conversation_uid(user_id, session_id), user_id=user_id)).single()
            return dict(rec["session"]) if rec else None

        found: dict[str, Any] | None = await self._exec.read(run)
        return found

    async def session_messages(self, user_id: str, session_id: str, limit: int,
                               cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        check_id(user_id, "user_id")
        n = clamp(limit, MAX_PAGE_LIMIT)

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            result = await tx.run(PAGE, uid=conversation_uid(user_id, session_id), user_id=user_id,
                                  cursor=cursor or "", limit=n + 1)
            return [dict(r["message"]) for r in await result.data()]

        rows: list[dict[str, Any]] = await self._exec.read(run)
        more = len(rows) > n
        rows = rows[:n]
        return await self._ceiling.keep_messages(rows), (str(rows[-1]["ord"]) if more and rows else None)

    async def search_messages(self, user_id: str, query: str, project_id: str | None, k: int
                              ) -> list[tuple[dict[str, Any], float]]:
        check_id(user_id, "user_id")
        terms = lucene_terms(query)
        if not terms:
            return []
        lucene = lucene_query([ft_key(user_id, FT_GROUP)], ("content",), terms)

        async def run(tx: AsyncManagedTransaction) -> list[tuple[dict[str, Any], float]]:
            result = await tx.run(SEARCH, lucene=lucene, user_id=user_id, project_id=project_id, k=clamp(k, 500))
            return [(dict(r["message"]), float(r["score"])) for r in await result.data()]

        hits: list[tuple[dict[str, Any], float]] = await self._exec.read(run)
        return list(await self._ceiling.keep_messages(hits, lambda h: h[0]))

    async def delete_session(self, user_id: str, session_id: str, before: str) -> int:
        check_id(user_id, "user_id")
        return await self._delete_sessions(user_id, [conversation_uid(user_id, session_id)], before)

    async def _delete_sessions(self, user_id: str, uids: list[str], before: str) -> int:
        async def run(tx: AsyncManagedTransaction) -> int:
            n = 0
            for uid in uids:
                rec = await (await tx.run(DELETE_SESSION, uid=uid, user_id=user_id, before=before)).single()
                n += int(rec["n"]) if rec else 0
            return n

        deleted: int = await self._exec.write(run)
        return deleted

    async def erase_messages_of(self, user_id: str, memory_ids: list[str]) -> int:
        check_id(user_id, "user_id")
        if not memory_ids:
            return 0

        async def run(tx: AsyncManagedTransaction) -> int:
            rec = await (await tx.run(ERASE_OF_MEMORIES, user_id=user_id, ids=memory_ids)).single()
            return int(rec["n"]) if rec else 0

        total = 0
        for _ in range(10_000):
            n: int = await self._exec.write(run)
            total += n
            if n < 1000:
                break
        return total

    async def expire_messages(self, before: str, user_id: str | None = None) -> int:
        async def run(tx: AsyncManagedTransaction, stmt: LiteralString) -> int:
            rec = await (await tx.run(stmt, before=before, user_id=user_id)).single()
            return int(rec["n"]) if rec else 0

        total = 0
        for stmt in (EXPIRE_MESSAGES, EMPTY_SESSIONS):
            for _ in range(10_000):
                n: int = await self._exec.write(run, stmt=stmt)
                total += n if stmt is EXPIRE_MESSAGES else 0
                if n < 1000:
                    break
        return total

    async def erase_sessions(self, user_id: str, before: str) -> int:
        """Every conversation of the user accepted before `before` (a delete of everything: the backend's
        `erase_tiers`)."""
        check_id(user_id, "user_id")

        async def batch(tx: AsyncManagedTransaction) -> list[str]:
            return [str(r["uid"]) for r in await (await tx.run(SESSIONS_BEFORE, user_id=user_id,
                                                               before=before)).data()]

        total = 0
        for _ in range(10_000):
            uids: list[str] = await self._exec.read(batch)
            if not uids:
                break
            for i in range(0, len(uids), 50):
                total += await self._delete_sessions(user_id, uids[i:i + 50], before)
        return total
