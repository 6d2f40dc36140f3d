"""Conversations: each conversation write keeps its messages, in order, under a session.

`service.py` (keep the messages of a conversation job; list, read, summarise, delete), `summary.py` (the
extractive offline summary). Their graph side is `service/stores/neo4j/conversations.py`.
"""
