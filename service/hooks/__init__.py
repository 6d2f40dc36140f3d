"""Claude Code hooks for the memory service: `python -m service.hooks session-start|post-tool-use|stop`.

A small HTTP client of the REST API (standard library only): session-start injects the stored context
of the current project, post-tool-use stores one redacted observation per tool call, stop stores a
session marker. None of them can slow the agent down or break it: each has a time budget, prints
nothing but the documented JSON, and always exits 0. See docs/hooks.md.
"""
