"""The Neo4j graph store: one executor (executor.py) shared by small parts, assembled by store.py
(`Neo4jGraphStore`, the facade of the whole backend; its parts are its attributes)."""

from service.stores.neo4j.store import Neo4jGraphStore

__all__ = ["Neo4jGraphStore"]
