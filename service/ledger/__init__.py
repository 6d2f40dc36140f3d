"""The durable half of a write: the ledger (the one writer of both stores), the outbox and per-memory locks, the
graph writer, a structured write's links. The sweep, the re-embedder and the reconciler write through it without
importing the memory rules; the write's stages above it are service/writepath/."""
