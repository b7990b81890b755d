"""Copying a thread's checkpoints to another thread, on one Redis or across the slots of a Redis Cluster.

On one Redis, COPY_THREAD (scripts.py) does it in one atomic script. Two threads of a cluster live in two
hash slots, maybe on two nodes, and no script may touch both, so there the copy is two scripts: READ_THREAD
takes a consistent picture of the source (atomically, on its node), WRITE_THREAD merges it into the target
(atomically, on its node). The target's indexes are written after its records, as PUT does, so a copy that
fails half-way leaves nothing visible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reactgraph.memory.redis_checkpoint.scripts import Script

if TYPE_CHECKING:
    from reactgraph.memory.redis_checkpoint.core import Plan, RedisSaverCore

# KEYS[1] source ns-set; ARGV source base. Returns: the namespace count, then per namespace its name, for each
# of cp: v: b: w: the field count and the field/value pairs, for each of wi: c: the member count and members;
# last the runs index's count and members.
READ_THREAD = Script("read_thread", r"""
local src, out = ARGV[1], {}
local function put_all(items)
  out[#out + 1] = #items
  for _, x in ipairs(items) do out[#out + 1] = x end
end
local namespaces = redis.call('SMEMBERS', KEYS[1])
out[1] = #namespaces
for _, ns in ipairs(namespaces) do
  out[#out + 1] = ns
  for _, kind in ipairs({'cp:', 'v:', 'b:', 'w:'}) do
    local flat = redis.call('HGETALL', src .. kind .. ns)
    out[#out + 1] = #flat / 2
    for _, x in ipairs(flat) do out[#out + 1] = x end
  end
  put_all(redis.call('ZRANGE', src .. 'wi:' .. ns, 0, -1))
  put_all(redis.call('ZRANGE', src .. 'c:' .. ns, 0, -1))
end
put_all(redis.call('ZRANGE', src .. 'runs', 0, -1))
return out
""")

# KEYS[1] target ns-set; ARGV target base, ttl, then READ_THREAD's reply. Merges into the target.
WRITE_THREAD = Script("write_thread", r"""
local dst, at = ARGV[1], 3
local function next_count()
  local n = tonumber(ARGV[at]); at = at + 1
  return n
end
local function copy_hash(key)
  local n = next_count()  -- before `at` is read: it moves past the count
  local last = at + 2 * n - 1
  for i = at, last, 1000 do redis.call('HSET', key, unpack(ARGV, i, math.min(i + 999, last))) end
  at = last + 1
end
local function copy_zset(key)
  local n = next_count()
  local last, args = at + n - 1, {}
  for i = at, last do
    args[#args + 1] = 0
    args[#args + 1] = ARGV[i]
    if #args >= 1000 then redis.call('ZADD', key, unpack(args)); args = {} end
  end
  if #args > 0 then redis.call('ZADD', key, unpack(args)) end
  at = last + 1
end
local namespaces = next_count()
for _ = 1, namespaces do
  local ns = ARGV[at]; at = at + 1
  for _, kind in ipairs({'cp:', 'v:', 'b:', 'w:'}) do copy_hash(dst .. kind .. ns) end
  copy_zset(dst .. 'wi:' .. ns)
  copy_zset(dst .. 'c:' .. ns)  -- the index last: a copy that failed above shows nothing
  redis.call('SADD', KEYS[1], ns)
end
copy_zset(dst .. 'runs')
touch(dst, tonumber(ARGV[2]))
return namespaces
""", "touch")


def copy_thread_plan(saver: RedisSaverCore, source_thread_id: str, target_thread_id: str) -> Plan:
    """One script on one Redis; on a cluster, a read on the source's slot, then a write on the target's."""
    if not getattr(getattr(saver, "_wire", None), "is_cluster", False):
        yield [saver._copy_thread_command(source_thread_id, target_thread_id)]
        return
    src, dst = saver._base(source_thread_id), saver._base(target_thread_id)
    [picture] = yield [(READ_THREAD, 1, src + "ns", src)]
    if picture and int(picture[0]) > 0:
        yield [(WRITE_THREAD, 1, dst + "ns", dst, saver.ttl, *picture)]
