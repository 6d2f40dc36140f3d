"""MCP server: the memory service's operations as tools for agents (docs/agents.md).

- `python -m service.mcp`: stdio server; every tool is one call to the running API's REST route.
- `MCP_TRANSPORT=http`: the API itself serves the same tools at `/mcp/` (streamable HTTP) on its
  own memory service objects (service/deps.py).
"""
