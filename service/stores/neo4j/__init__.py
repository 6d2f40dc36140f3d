"""The Neo4j graph store (service.stores.neo4j.store.Neo4jGraphStore)."""

from service.stores.neo4j.store import Neo4jGraphStore

__all__ = ["Neo4jGraphStore"]
