"""The write path: the ledger (the one writer of both stores), the outbox, the graph writer, the reconciler."""
