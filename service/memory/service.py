"""The operations the API, the MCP server and the worker share (writes.py and reads.py over base.py)."""

from __future__ import annotations

from service.memory.portability import MemoryPortability
from service.memory.reads import MemoryReads
from service.memory.writes import MemoryWrites


class MemoryService(MemoryWrites, MemoryReads, MemoryPortability):
    """API side: validate, enqueue, read. Worker side: extract, embed, write both stores."""
