"""User shards: the routing is stable (the documented formula, across processes and hash seeds) and balanced."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.core.settings import Settings, describe_errors
from service.tasks.shards import parse_shards, queue_name, queue_names, shard_of, shards_of_process

ROOT = Path(__file__).resolve().parents[2]


def documented(user_id: str, shards: int) -> int:
    """The formula docs/deployment.md and service/tasks/shards.py write down, for clients in other languages."""
    return int.from_bytes(hashlib.sha256(user_id.encode("utf-8")).digest()[:8], "big") % shards


@given(st.text(min_size=1, max_size=200), st.integers(min_value=1, max_value=1024))
@settings(max_examples=500, deadline=None)
def test_shard_is_the_documented_hash_and_in_range(user_id: str, shards: int) -> None:
    k = shard_of(user_id, shards)
    assert 0 <= k < shards
    assert k == (documented(user_id, shards) if shards > 1 else 0)
    assert k == shard_of(user_id, shards)  # the same user, the same shard


def test_known_users_keep_their_shards() -> None:
    """Pinned: a change of the hash would move every user's queue under a running deployment."""
    assert [shard_of(u, 8) for u in ["alice", "bob", "carol", "dave", "u-0001", "🙂"]] == [7, 2, 6, 3, 7, 0]
    assert shard_of("alice", 1000) == 207
    assert shard_of(None, 8) == 0 and shard_of("", 8) == 0  # jobs without a user: shard 0


def test_shards_do_not_depend_on_pythons_hash_seed() -> None:
    code = "from service.tasks.shards import shard_of; print([shard_of(f'user-{i}', 7) for i in range(50)])"
    outs = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        outs.add(out.stdout)
    assert len(outs) == 1
    assert outs.pop().strip() == str([shard_of(f"user-{i}", 7) for i in range(50)])


@pytest.mark.parametrize("shards", [2, 3, 4, 8, 16])
def test_many_users_spread_evenly(shards: int) -> None:
    n = 40_000
    counts = Counter(shard_of(str(uuid.UUID(int=i * 7919 + 13)), shards) for i in range(n))
    assert sorted(counts) == list(range(shards))
    expected = n / shards
    # 5 standard deviations of a binomial count: a fair hash stays inside, a skewed one (e.g. mod of a short
    # prefix, or every id on one shard) does not.
    bound = 5 * (expected * (1 - 1 / shards)) ** 0.5
    assert max(abs(c - expected) for c in counts.values()) < bound, counts
    # and ids that differ only in their end (user-1, user-2, ...) spread too
    tails = Counter(shard_of(f"user-{i}", shards) for i in range(n))
    assert max(abs(c - expected) for c in tails.values()) < bound, tails


def test_queue_names() -> None:
    assert queue_name("q", 0, 1) == "q" and queue_names("q", 1) == ["q"]  # one machine: nothing changes
    assert queue_names("q", 3) == ["q:shard:0", "q:shard:1", "q:shard:2"]
    with pytest.raises(ValueError, match=r"shard 3 is not one of 0\.\.2"):
        queue_name("q", 3, 3)


def test_worker_processes_cover_every_shard_once() -> None:
    for processes in range(1, 6):
        for shards in range(1, 9):
            owned = [shards_of_process(i, processes, shards) for i in range(processes)]
            assert all(owned), (processes, shards)  # no process without a queue
            flat = [k for mine in owned for k in mine]
            assert sorted(set(flat)) == list(range(shards))
            if shards >= processes:
                assert len(flat) == shards  # each shard in exactly one process: a user's jobs in one place


def test_parse_shards() -> None:
    assert parse_shards([], 4) == [0, 1, 2, 3]
    assert parse_shards(["2"], 4) == [2]
    assert parse_shards(["0,3", "1"], 4) == [0, 1, 3]
    assert parse_shards(["all"], 3) == [0, 1, 2]
    with pytest.raises(ValueError, match=r"WORKER_SHARDS is 4, so a shard is one of 0\.\.3"):
        parse_shards(["4"], 4)
    with pytest.raises(ValueError, match="'x'"):
        parse_shards(["x"], 4)


def test_sentinel_settings() -> None:
    s = Settings(_env_file=None, redis_sentinels="10.0.0.1:26379, sentinel-b:26380,[::1]:26381",  # type: ignore[call-arg]
                 redis_sentinel_master="primary", redis_sentinel_password="s3cret",
                 redis_url="redis://:pw@ignored:6379/2")
    assert s.redis.sentinel_addresses == [("10.0.0.1", 26379), ("sentinel-b", 26380), ("::1", 26381)]
    assert "pw" not in s.redis.safe_url and "s3cret" not in s.redis.safe_url
    assert "primary" in s.redis.safe_url
    from service.core.redis_client import redis_settings

    rs = redis_settings(s.redis)
    assert rs.sentinel and rs.host == s.redis.sentinel_addresses
    assert rs.sentinel_master == "primary" and rs.database == 2
    with pytest.raises(Exception) as exc:
        Settings(_env_file=None, redis_sentinels="hostonly")  # type: ignore[call-arg]
    assert describe_errors(exc.value) == [  # type: ignore[arg-type]
        "REDIS_SENTINELS: must be host:port pairs separated by commas, e.g. 10.0.0.5:26379 ('hostonly' is not) "
        "(got hostonly)"]
