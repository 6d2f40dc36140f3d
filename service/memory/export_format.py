"""The export file's format, as far as the API side reads it before queueing an import: the upload's lines
(NDJSON, or gzip of it) and its header line (format and version). The lines themselves: portability.py."""

from __future__ import annotations

import gzip
import io
import json
from typing import Any

from service.core.errors import DomainError

FORMAT = "memory-export"
VERSION = 1
HEADER_BYTES = 64 * 1024  # a header line is far shorter


def decode_body(body: bytes) -> list[str]:
    """The lines of an upload: NDJSON, or gzip-compressed NDJSON (detected by its magic bytes)."""
    if body[:2] == b"\x1f\x8b":
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError) as e:
            raise DomainError(f"the upload looks gzip-compressed but does not decompress: {e}") from e
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DomainError(f"the upload is not UTF-8 text (NDJSON, optionally gzip): {e}") from e
    return text.splitlines()


def check_header(raw: str) -> dict[str, Any]:
    """The header line of an export, checked: its format and version."""
    try:
        header = json.loads(raw)
    except ValueError as e:
        raise DomainError(f"line 1 is not JSON: {e}") from e
    if not isinstance(header, dict) or header.get("type") != "header" or header.get("format") != FORMAT:
        raise DomainError(f"line 1 is not a {FORMAT} header (write files with GET /v1/export)")
    if header.get("version") != VERSION:
        raise DomainError(f"export version {header.get('version')!r} is not supported (this is {VERSION})")
    return header


def read_header(body: bytes) -> dict[str, Any]:
    """The header of an upload, reading only its first line (decompressing only that much of a gzip), so the
    API can check the owner before queueing without unpacking the whole file."""
    if body[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(body)) as f:
                first = b""
                for _ in range(1000):  # bounded: blank lines before the header
                    first = f.readline(HEADER_BYTES)
                    if first.strip() or not first:
                        break
        except (OSError, EOFError) as e:
            raise DomainError(f"the upload looks gzip-compressed but does not decompress: {e}") from e
    else:
        first = body.lstrip()[:HEADER_BYTES].split(b"\n", 1)[0]
    if not first.strip():
        raise DomainError("the upload is empty")
    return check_header(first.decode("utf-8", errors="replace"))
