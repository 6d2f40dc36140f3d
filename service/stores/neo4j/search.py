"""Full-text search of the Neo4j graph store: Lucene escaping, the tenant key of every query, and fact scoring.

Full-text search is multi-tenant: every Entity and RELATES edge carries `ft_key`, one Lucene token derived
from (user, group), and each query requires one of the caller's keys. So the index's own `limit` only ever
sees the caller's documents."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import structlog
from neo4j import AsyncManagedTransaction

from service.stores.neo4j import cypher_reads, ddl
from service.stores.neo4j.lucene import lucene_escape
from service.stores.neo4j.rows import MAX_NAME_CHARS, MAX_QUERY_CHARS, MAX_TERM_CHARS, MAX_TERMS, iso_utc

log = structlog.get_logger(__name__)

# ---- search tuning ---------------------------------------------------------------------------

ENTITY_HITS = 20          # entities kept from the name/alias match
DIRECT_EDGES = 50         # edges read per matched entity
NEIGHBOURS = 10           # neighbours followed per matched entity
NEIGHBOUR_EDGES = 5       # edges read per neighbour
HUB_DEGREE = 200          # neighbours with more edges than this are not followed (no topical signal)
ONE_HOP_WEIGHT = 0.4      # a neighbour's edge counts this much of the entity match that reached it
RECENCY_HALF_LIFE_DAYS = 180.0
# The graph retriever proposes candidates that the query's embedding then ranks (service/memory/reads.py), so
# it reads every memory of a matched entity up to these bounds rather than a few arbitrary ones.
MEMORIES_PER_ENTITY = 1000  # memories read per matched entity (and never more than the caller's limit)
MEMORIES_PER_NEIGHBOUR = 10
MAX_MENTIONS = 1000  # an entity mentioned more often is a hub: its memories are not read
MAX_CANDIDATES = 5000  # the most memories one graph search returns


# ---- helpers --------------------------------------------------------------------------------

_POSSESSIVE = re.compile(r"['\u2019]s?(?=\W*$)", re.IGNORECASE)


def lucene_terms(query: str) -> list[str]:
    """The query's searchable terms, escaped: split on whitespace, terms without a letter or digit
    dropped (they analyse to nothing, and an empty required clause would match everything),
    case-insensitive duplicates dropped, at most MAX_TERMS of at most MAX_TERM_CHARS."""
    seen: set[str] = set()
    terms: list[str] = []
    for raw in query[:MAX_QUERY_CHARS].split():
        # a possessive is its name: Lucene's standard tokenizer keeps "melanie's" whole, which no name matches
        term = _POSSESSIVE.sub("", raw)[:MAX_TERM_CHARS]
        folded = term.casefold()
        if folded in seen or not any(ch.isalnum() for ch in term):
            continue
        seen.add(folded)
        terms.append(lucene_escape(term))
        if len(terms) == MAX_TERMS:
            break
    return terms


def lucene_query(keys: list[str], fields: tuple[str, ...], terms: list[str], live_only: bool = False) -> str:
    """`+ft_key:(k1 k2)^0 +(field:(t1 t2) ...)`: one of the caller's tenant keys is required and
    scores nothing (boost 0); the terms score as usual. `live_only` excludes documents that have
    an invalid_at or expired_at (open range = "field exists")."""
    body = " ".join(terms)
    matches = " ".join(f"{f}:({body})" for f in fields)
    live = " -invalid_at:[* TO *] -expired_at:[* TO *]" if live_only else ""
    return f"+ft_key:({' '.join(keys)})^0 +({matches}){live}"




def recency(valid_at: str | None, now: datetime) -> float:
    stamp = iso_utc(valid_at)
    if stamp is None:
        return 0.5
    age_days = max(0.0, (now - datetime.fromisoformat(stamp)).total_seconds() / 86400)
    return float(0.5 ** (age_days / RECENCY_HALF_LIFE_DAYS))


def fact_score(evidence: list[float], support: int, valid_at: str | None, now: datetime) -> float:
    """Relevance in [0, 1]. `evidence` are the edge's match strengths in [0, 1] (entity or fact
    full-text normalised by the best in the result, one-hop ones weighted down), combined as a
    probabilistic OR; support (number of memories) and recency then scale it within [0.7, 1].
    So an edge of a matched entity always ranks above a neighbour's edge reached through it."""
    miss = 1.0
    for e in evidence:
        miss *= 1.0 - min(1.0, max(0.0, e))
    relevance = 1.0 - miss
    support_part = 1.0 - 0.5 ** max(0, support)
    score = relevance * (0.7 + 0.2 * support_part + 0.1 * recency(valid_at, now))
    return round(min(1.0, max(0.0, score)), 6)


async def entity_hits(tx: AsyncManagedTransaction, query: str, terms: list[str], keys: list[str],
                      common: dict[str, Any]) -> dict[str, float]:
    """The entities the query names: full-text over names and aliases (scores normalised by the best) and
    an exact match of the whole query (1.0); at most ENTITY_HITS, best first."""
    hits: dict[str, float] = {}
    if terms:
        result = await tx.run(cypher_reads.ENTITY_TEXT_HITS, index=ddl.ENTITY_TEXT_INDEX,
                              lucene=lucene_query(keys, ("name", "aliases"), terms), k=ENTITY_HITS, **common)
        raw: dict[str, float] = {}
        for r in await result.data():  # a merged entity's hit counts for its target
            raw[str(r["id"])] = max(raw.get(str(r["id"]), 0.0), float(r["score"]))
        top = max(raw.values(), default=0.0)
        hits = {k: v / top for k, v in raw.items()} if top > 0 else {}
    name_lc = query[:MAX_QUERY_CHARS].strip().casefold()[:MAX_NAME_CHARS]
    if name_lc:
        for r in await (await tx.run(cypher_reads.ENTITY_EXACT_HITS, name_lc=name_lc, **common)).data():
            hits[str(r["id"])] = 1.0
    best = sorted(hits, key=lambda h: (-hits[h], h))[:ENTITY_HITS]
    return {h: hits[h] for h in best}
