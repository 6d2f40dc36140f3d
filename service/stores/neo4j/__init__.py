"""The Neo4j graph store: one executor (executor.py) shared by small parts, assembled by store.py
(`Neo4jGraphStore`, the facade of the whole backend; its parts are its attributes). Import each from its module."""
