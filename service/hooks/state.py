"""Per-session counters on disk: how many observations a session captured, and what stop last stored.

Files live in `${XDG_STATE_HOME:-~/.local/state}/memory-hooks/`:

- `<session>.count`: one byte appended per observation. Appends with `O_APPEND` of one byte are
  atomic, so concurrent post-tool-use commands (Claude Code runs parallel tool calls' hooks at the
  same time) never lose a count and need no lock; the count is the file's size. The file stops
  growing at `MAX_COUNT` bytes.
- `<session>.stop`: the count the last stop marker carried, written to a temporary file and renamed
  into place (atomic), so stop stores a new marker only when there are new observations.

Files older than `MAX_AGE_SECONDS` are removed by session-start (at most `MAX_SCAN` directory entries
looked at per run). Every failure (read-only home, full disk) is ignored: counting is best effort and
never stops a hook.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path

MAX_COUNT = 65_535
MAX_AGE_SECONDS = 14 * 24 * 3600
MAX_SCAN = 2000

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = (env.get("XDG_STATE_HOME") or "").strip()
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "state"
    return root / "memory-hooks"


def safe_session(session_id: str | None) -> str:
    """A file-name-safe form of a session id (no path separators, no leading dot, <= 128 chars)."""
    cleaned = _UNSAFE.sub("-", session_id or "").strip(".-")[:128]
    return cleaned or "unknown"


class SessionState:
    def __init__(self, session_id: str | None, directory: Path | None = None) -> None:
        self.directory = directory if directory is not None else state_dir()
        name = safe_session(session_id)
        self.count_file = self.directory / f"{name}.count"
        self.stop_file = self.directory / f"{name}.stop"
        self.calls_file = self.directory / f"{name}.calls"  # one byte per tool call of the trace: "." ok, "x" failed
        self.done_file = self.directory / f"{name}.done"  # the number of calls the last completion covered

    def count(self) -> int:
        try:
            return min(self.count_file.stat().st_size, MAX_COUNT)
        except OSError:
            return 0

    def increment(self) -> int:
        """Count one more observation; returns the new count (0 when the state is unavailable)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            if self.count() >= MAX_COUNT:
                return MAX_COUNT
            fd = os.open(self.count_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, b".")
            finally:
                os.close(fd)
        except OSError:
            return 0
        return self.count()

    def record_call(self, failed: bool) -> int:
        """Append one tool call; returns its position in the session (0-based), -1 when the state is unavailable.

        The position is the file offset after this process's own one-byte `O_APPEND` write, so concurrent
        calls get distinct positions."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.calls_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                if os.fstat(fd).st_size >= MAX_COUNT:
                    return -1
                os.write(fd, b"x" if failed else b".")
                return os.lseek(fd, 0, os.SEEK_CUR) - 1
            finally:
                os.close(fd)
        except OSError:
            return -1

    def calls(self) -> bytes:
        """The session's tool calls so far, one byte each ("." ok, "x" failed)."""
        try:
            with open(self.calls_file, "rb") as f:
                return f.read(MAX_COUNT)
        except OSError:
            return b""

    def last_marked(self) -> int | None:
        return self._read_int(self.stop_file)

    def mark(self, count: int) -> None:
        self._write_int(self.stop_file, count)

    def last_completed(self) -> int | None:
        return self._read_int(self.done_file)

    def mark_completed(self, calls: int) -> None:
        self._write_int(self.done_file, calls)

    @staticmethod
    def _read_int(path: Path) -> int | None:
        try:
            return int(path.read_text(encoding="ascii").strip())
        except (OSError, ValueError):
            return None

    def _write_int(self, path: Path, value: int) -> None:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp.write_text(str(value), encoding="ascii")
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()


def prune(directory: Path | None = None, now: float | None = None) -> int:
    """Remove state files older than MAX_AGE_SECONDS; returns how many were removed."""
    directory = directory if directory is not None else state_dir()
    now = time.time() if now is None else now
    removed = 0
    try:
        with os.scandir(directory) as entries:
            for i, entry in enumerate(entries):
                if i >= MAX_SCAN:
                    break
                try:
                    if entry.is_file() and now - entry.stat().st_mtime > MAX_AGE_SECONDS:
                        os.unlink(entry.path)
                        removed += 1
                except OSError:
                    continue
    except OSError:
        return removed
    return removed
