"""The memory service, one object per part (import each from its module; service/deps.py builds them): reads.py,
search.py, traces.py, curation.py, graph_reads.py, backlog.py, portability.py (the read side); intake.py (the API
side of writes); writes.py (the worker side)."""
