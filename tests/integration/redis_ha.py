"""A private Redis Sentinel set for failover tests: a primary, a replica and three sentinels on 127.0.0.1, real
`redis-server` processes (the sentinels are `redis-server <conf> --sentinel`, what Debian's redis-sentinel runs).

Ports: TEST_REDIS_HA_PORTS="primary,replica,s1,s2,s3" when given (a shared machine hands each engineer a range),
else free ports."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from scripts.bench.procs import free_port, stop, wait_port

MASTER = "mymaster"
# 3 s, not 1: in a CI run at full load one sentinel got no reply from the just-promoted primary within 1 s, the
# others agreed, and a second failover promoted the restarted node before it had synced: every task lost (a
# failback to an empty replica, Redis's behaviour, which WAIT cannot prevent). Deployments use 5-30 s.
DOWN_AFTER_MS = 3000
FAILOVER_TIMEOUT_MS = 4000


def sentinel_id(port: int) -> str:
    """A sentinel's run id (40 hex characters), fixed by its port so that each can name the others."""
    return f"{port:040x}"


def ports() -> list[int]:
    given = os.environ.get("TEST_REDIS_HA_PORTS")
    if given:
        out = [int(p) for p in given.split(",")]
        assert len(out) == 5, "TEST_REDIS_HA_PORTS: primary,replica,sentinel1,sentinel2,sentinel3"
        return out
    return [free_port() for _ in range(5)]


def command(port: int, *args: str, timeout: float = 2.0) -> str:
    """One inline command to a Redis or sentinel on 127.0.0.1 (RESP reply returned raw, decoded)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall((" ".join(args) + "\r\n").encode())
        data = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            data += chunk
            if not chunk or data.endswith(b"\r\n"):
                break
        return data.decode(errors="replace")


@dataclass
class SentinelSet:
    tmp: Path
    primary_port: int
    replica_port: int
    sentinel_ports: list[int]
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def sentinels(self) -> str:
        """REDIS_SENTINELS for this set."""
        return ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)

    def _redis(self, port: int, *extra: str) -> None:
        exe = shutil.which("redis-server")
        assert exe, "redis-server missing (scripts/test.sh installs it)"
        d = self.tmp / f"redis-{port}"
        d.mkdir(parents=True, exist_ok=True)
        self.procs[port] = subprocess.Popen(
            [exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(d), "--save", "", "--appendonly", "no",
             "--logfile", str(d / "redis.log"), *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(port, self.procs[port], 20, f"redis {port}")

    def _sentinel(self, port: int) -> None:
        exe = shutil.which("redis-server")
        assert exe
        d = self.tmp / f"sentinel-{port}"
        d.mkdir(parents=True, exist_ok=True)
        conf = d / "sentinel.conf"  # sentinels rewrite their configuration: one writable file each
        # The replica and the other sentinels written in as known (what a sentinel's own configuration rewrite
        # records): found through INFO and hello messages instead, they took ~6 s to appear at every start.
        known = "".join(f"sentinel known-sentinel {MASTER} 127.0.0.1 {p} {sentinel_id(p)}\n"
                        for p in self.sentinel_ports if p != port)
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {d}\nlogfile {d / 'sentinel.log'}\n"
            f"sentinel myid {sentinel_id(port)}\n"
            f"sentinel monitor {MASTER} 127.0.0.1 {self.primary_port} 2\n"
            f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {MASTER} 1\n"
            f"sentinel known-replica {MASTER} 127.0.0.1 {self.replica_port}\n{known}")
        self.procs[port] = subprocess.Popen([exe, str(conf), "--sentinel"], stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL)
        wait_port(port, self.procs[port], 20, f"sentinel {port}")

    def start(self) -> SentinelSet:
        # The first sync without Redis's 5 s wait for more replicas (repl-diskless-sync-delay), then the default
        # again: the resyncs of a failover keep the wait a deployment has.
        self._redis(self.primary_port, "--repl-diskless-sync-delay", "0")
        self._redis(self.replica_port, "--replicaof", "127.0.0.1", str(self.primary_port),
                    "--repl-diskless-sync-delay", "0")
        self.wait_replica_synced(20)
        for p in (self.primary_port, self.replica_port):
            assert "OK" in command(p, "CONFIG", "SET", "repl-diskless-sync-delay", "5")
        for p in self.sentinel_ports:
            self._sentinel(p)
        want = f"slaves=1,sentinels={len(self.sentinel_ports)}"
        self.wait(lambda: all(want in self._info_sentinel(p) for p in self.sentinel_ports),
                  "the sentinels to find each other and the replica", 30)
        return self

    def _info_sentinel(self, port: int) -> str:
        try:
            return command(port, "INFO", "sentinel")
        except OSError:
            return ""

    def wait_replica_synced(self, timeout: float) -> None:
        self.wait(lambda: "master_link_status:up" in command(self.replica_port, "INFO", "replication"),
                  "the replica to sync", timeout)

    def master_port(self) -> int | None:
        """The primary's port as the first sentinel that answers sees it."""
        for p in self.sentinel_ports:
            try:
                reply = command(p, "SENTINEL", "get-master-addr-by-name", MASTER)
            except OSError:
                continue
            parts = [line for line in reply.split("\r\n") if line and line[0] not in "*$"]
            if len(parts) == 2:
                return int(parts[1])
        return None

    def pause_replica(self, paused: bool) -> None:
        """SIGSTOP / SIGCONT the replica: stopped, it acknowledges nothing, so WAIT 1 on the primary times out."""
        self.procs[self.replica_port].send_signal(signal.SIGSTOP if paused else signal.SIGCONT)

    def kill_primary(self) -> None:
        proc = self.procs[self.primary_port]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def restart_old_primary(self) -> None:
        """What a Sentinel-aware supervisor does (docs/deployment.md): the killed primary starts again on its port as
        a replica of the primary the sentinels name. Started as a primary instead (its own configuration), it takes
        writes for the seconds until the sentinels demote it (each answered 503: no replica holds it; its job is
        not run: TaskQueue.mark_processing) and the new primary waits longer for its replica, so writes answer 503
        for ~17 s instead of ~9 s (docs/decisions.md)."""
        primary = self.master_port()
        assert primary is not None and primary != self.primary_port, "no failover to restart after"
        self._redis(self.primary_port, "--replicaof", "127.0.0.1", str(primary))

    @staticmethod
    def wait(predicate, what: str, timeout: float) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        for _ in range(int(timeout * 10) + 1):  # bounded in count and in time
            try:
                if predicate():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}")

    def close(self) -> None:
        for proc in self.procs.values():
            stop(proc, timeout=10)


def start_sentinel_set(tmp: Path) -> SentinelSet:
    primary, replica, *sentinels = ports()
    return SentinelSet(tmp, primary, replica, sentinels).start()
