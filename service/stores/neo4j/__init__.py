"""The Neo4j graph store: one executor (executor.py) shared by small parts, assembled by store.py
(`Neo4jGraphStore`: the whole backend, its parts as attributes). Import each from its module."""
