"""Task traces ("runs"): what an agent tried, which tool calls failed and how the task ended.

`schemas.py` (the API's models), `jobs.py` (the job kinds that write them), `intake.py` (the API side: validate,
redact, enqueue), `writes.py` (the worker side: embed, write the graph), `service.py` (the reads).
Their graph side is `service/stores/neo4j/runs.py`.
"""
