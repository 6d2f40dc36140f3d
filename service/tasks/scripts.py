"""The task queue's Redis scripts: a write is accepted, and a task ends, each in one script (one round trip, all or
nothing), so that a crash leaves all of it or none (service/tasks/queue.py `TaskQueue` runs them)."""

from __future__ import annotations

# Accepting a write is this one script (one round trip, all or nothing): the idempotency pointer of a live task
# answers a retried request; otherwise the status record, the pending entry, the pointer and the ARQ job (what
# ArqRedis.enqueue_job writes: the serialised job under arq:job:<id> and its id in the queue's sorted set) are
# written together. KEYS: record, pending, pointer, ARQ job, ARQ result, ARQ queue (the user's shard's), the set of
# shard counts, the user's task index. ARGV: record JSON, pending score, task id, TTL s, serialised job, job expiry
# ms, queue score, the records' key prefix, WORKER_SHARDS, the index's bound (0: no user, no index), the acceptance
# time in microseconds (the index's score: tasks accepted in the same millisecond keep their order).
ACCEPT = """
local existing = redis.call('GET', KEYS[3])
if existing and redis.call('EXISTS', ARGV[8] .. existing) == 1 then
    return existing
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('SET', KEYS[3], ARGV[3], 'EX', ARGV[4])
if redis.call('EXISTS', KEYS[4], KEYS[5]) == 0 then
    redis.call('PSETEX', KEYS[4], ARGV[6], ARGV[5])
    redis.call('ZADD', KEYS[6], ARGV[7], ARGV[3])
end
redis.call('SADD', KEYS[7], ARGV[9])
local kept = tonumber(ARGV[10])
if kept > 0 then
    local oldest = string.format('%.0f', tonumber(ARGV[11]) - tonumber(ARGV[4]) * 1000000)
    redis.call('ZADD', KEYS[8], ARGV[11], ARGV[3])
    redis.call('ZREMRANGEBYSCORE', KEYS[8], '-inf', '(' .. oldest)
    redis.call('ZREMRANGEBYRANK', KEYS[8], 0, -kept - 1)
    redis.call('EXPIRE', KEYS[8], ARGV[4])
end
return false
"""

# A task ends in one script: its final record, out of the pending set, its idempotency pointer shrunk to the
# window (or dropped) only if it still names this task, its job's lease dropped, its step caches dropped, and
# (completed) the memory -> task index that lets a delete erase the content from the result. KEYS: record,
# pending, pointer, lease, then ARGV[5] step keys to delete, then the index sets. ARGV: record JSON, TTL s,
# task id, window s, step count, "1" when the record has a pointer.
FINISH = """
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[3])
if ARGV[6] == '1' and redis.call('GET', KEYS[3]) == ARGV[3] then
    if tonumber(ARGV[4]) > 0 then redis.call('EXPIRE', KEYS[3], ARGV[4]) else redis.call('DEL', KEYS[3]) end
end
redis.call('DEL', KEYS[4])
local steps = tonumber(ARGV[5])
for i = 5, 4 + steps do redis.call('DEL', KEYS[i]) end
for i = 5 + steps, #KEYS do
    redis.call('SADD', KEYS[i], ARGV[3])
    redis.call('EXPIRE', KEYS[i], ARGV[2])
end
return 1
"""
