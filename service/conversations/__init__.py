"""Conversations: each conversation write keeps its messages, in order, under a session.

`intake.py` (the API side: the session a write names, a session's delete), `writes.py` (the worker side: keep
a conversation job's messages, erasures, retention, the delete job), `service.py` (the reads: list, read,
summarise, search), `summary.py` (the extractive offline summary). Their graph side is
`service/stores/neo4j/conversations.py`.
"""
