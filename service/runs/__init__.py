"""Task traces ("runs"): what an agent tried, which tool calls failed and how the task ended.

`schemas.py` (the API's models), `jobs.py` (the one job kind that writes them), `service.py` (validate,
redact, enqueue; the worker's write; reads). Their graph side is `service/stores/neo4j/runs.py`.
"""
