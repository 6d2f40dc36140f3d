"""Where the console's files are: its templates and static files, beside this module."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
TEMPLATES = HERE / "templates"
