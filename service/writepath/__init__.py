"""The worker side of a write: the stages (stages.py: extract -> draft -> store -> supersede -> changes -> messages)
and the writers that run them top to bottom, one per kind of job (writes.py: conversation, raw, update, delete;
graph_writes.py: a structured graph write). What persists a memory in both stores is service/ledger/."""
