"""The task queue: job models, the registry, the queue's Redis scripts, user shards."""
