"""The memory service: writes, reads and result mapping (service/memory/service.py)."""

from service.memory.service import MemoryService

__all__ = ["MemoryService"]
