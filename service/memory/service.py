"""The read side the API, the MCP server and the console share: memories, listings, context, search, graph
listings, curation and traces, export. Writes are queued by intake.py and run by writes.py in the worker."""

from __future__ import annotations

from service.memory.portability import MemoryPortability
from service.memory.reads import MemoryReads


class MemoryService(MemoryReads, MemoryPortability):
    """Reads: the stores as the API's caller may see them."""
