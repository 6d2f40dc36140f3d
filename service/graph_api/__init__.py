"""The graph as an API (docs/graph.md): structured writes of entities, relations and facts (API side `intake.py`,
worker side `writes.py`, both through the memory write path), facts about an entity and structural queries
(`reads.py`), and the entity type and predicate vocabulary (`vocabulary.py`)."""
