"""Lua scripts that make each checkpoint operation one atomic round trip (layout in `layout.py`)."""

from __future__ import annotations

import hashlib

# Shared helpers, each script gets only those it uses (defining the rest costs the server on every call).
# Key names are built in-script from the thread's base: every key of a thread shares its hash tag, so a
# script stays on one slot; KEYS[1] is always a real key of that thread so proxies and clusters route
# the call to the right node.
_HELPERS: dict[str, str] = {
    "KINDS": "local KINDS = {'c:', 'cp:', 'v:', 'b:', 'w:', 'wi:'}",
    "split0": r"""
local function split0(s)
  local out, pos = {}, 1
  if not s or s == '' then return out end
  while true do
    local i = string.find(s, '\0', pos, true)
    if not i then out[#out + 1] = string.sub(s, pos); return out end
    out[#out + 1] = string.sub(s, pos, i - 1)
    pos = i + 1
  end
end""",
    "blob_fields": r"""
local function blob_fields(links)
  local parts, fields = split0(links), {}
  for i = 2, #parts - 1, 2 do fields[#fields + 1] = parts[i] .. '\0' .. parts[i + 1] end
  return fields
end""",
    # unpack() is bounded by Lua's C stack, so long argument lists go in slices (of even length, for pairs)
    "chunked": r"""
local function chunked(cmd, key, items, first)
  for i = first or 1, #items, 1000 do
    redis.call(cmd, key, unpack(items, i, math.min(i + 999, #items)))
  end
end""",
    "touch": r"""
local function touch(base, ttl)
  if ttl <= 0 then return end
  redis.call('EXPIRE', base .. 'ns', ttl)
  redis.call('EXPIRE', base .. 'runs', ttl)
  for _, ns in ipairs(redis.call('SMEMBERS', base .. 'ns')) do
    for _, kind in ipairs(KINDS) do redis.call('EXPIRE', base .. kind .. ns, ttl) end
  end
end""",
    "writes_of": r"""
local function writes_of(base, ns, cid)
  return redis.call('ZRANGEBYLEX', base .. 'wi:' .. ns, '[' .. cid .. '\0', '(' .. cid .. '\1')
end""",
    "drop_checkpoint": r"""
local function drop_checkpoint(base, ns, cid)
  redis.call('ZREM', base .. 'c:' .. ns, cid)
  redis.call('HDEL', base .. 'cp:' .. ns, cid)
  redis.call('HDEL', base .. 'v:' .. ns, cid)
  local fields = writes_of(base, ns, cid)
  if #fields > 0 then
    chunked('HDEL', base .. 'w:' .. ns, fields)
    chunked('ZREM', base .. 'wi:' .. ns, fields)
  end
end""",
    # a blob is shared by every checkpoint that kept that channel version, so only unreferenced ones go
    "gc_blobs": r"""
local function gc_blobs(base, ns)
  local live, dead = {}, {}
  for _, l in ipairs(redis.call('HVALS', base .. 'v:' .. ns)) do
    for _, f in ipairs(blob_fields(l)) do live[f] = true end
  end
  for _, f in ipairs(redis.call('HKEYS', base .. 'b:' .. ns)) do
    if not live[f] then dead[#dead + 1] = f end
  end
  if #dead > 0 then chunked('HDEL', base .. 'b:' .. ns, dead) end
end""",
    "gc_runs": r"""
local function gc_runs(base)
  local dead = {}
  for _, m in ipairs(redis.call('ZRANGE', base .. 'runs', 0, -1)) do
    local p = split0(m)
    if not redis.call('ZSCORE', base .. 'c:' .. p[2], p[3]) then dead[#dead + 1] = m end
  end
  if #dead > 0 then chunked('ZREM', base .. 'runs', dead) end
end""",
}
_NEEDS = {"blob_fields": ("split0",), "touch": ("KINDS",), "drop_checkpoint": ("writes_of", "chunked"),
          "gc_blobs": ("blob_fields", "chunked"), "gc_runs": ("split0", "chunked")}


def _prelude(names: tuple[str, ...]) -> str:
    wanted: set[str] = set()
    pending = list(names)
    while pending:
        name = pending.pop()
        if name not in wanted:
            wanted.add(name)
            pending.extend(_NEEDS.get(name, ()))
    return "\n".join(_HELPERS[n].strip() for n in _HELPERS if n in wanted)  # dict order = dependency order


class Script:
    """A Lua script known by its SHA1, so calls are EVALSHA and the source is sent only after NOSCRIPT."""

    def __init__(self, name: str, body: str, *helpers: str) -> None:
        self.name = name
        self.source = _prelude(helpers) + "\n" + body
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()

    def __repr__(self) -> str:
        return f"Script({self.name})"


# KEYS[1] ns-set; ARGV base, ns, checkpoint id, record, links, ttl, run member, blob field/value pairs...
PUT = Script("put", r"""
local base, ns, cid = ARGV[1], ARGV[2], ARGV[3]
if #ARGV > 7 then chunked('HSET', base .. 'b:' .. ns, ARGV, 8) end
redis.call('HSET', base .. 'cp:' .. ns, cid, ARGV[4])
redis.call('HSET', base .. 'v:' .. ns, cid, ARGV[5])
redis.call('SADD', KEYS[1], ns)
if ARGV[7] ~= '' then redis.call('ZADD', base .. 'runs', 0, ARGV[7]) end
-- the id enters the index last: if anything above failed, the checkpoint never becomes visible
redis.call('ZADD', base .. 'c:' .. ns, 0, cid)
touch(base, tonumber(ARGV[6]))
return 1
""", "chunked", "touch")

# KEYS[1] ns-set; ARGV base, ns, ttl, then (field, value, overwrite "1"/"0") triplets
PUT_WRITES = Script("put_writes", r"""
local base, ns = ARGV[1], ARGV[2]
local wkey, ikey = base .. 'w:' .. ns, base .. 'wi:' .. ns
for i = 4, #ARGV, 3 do
  -- a task's regular writes are kept as first stored (a retried task must not change history);
  -- special writes (errors, interrupts, resumes) are replaced
  if ARGV[i + 2] == '1' then redis.call('HSET', wkey, ARGV[i], ARGV[i + 1])
  else redis.call('HSETNX', wkey, ARGV[i], ARGV[i + 1]) end
  redis.call('ZADD', ikey, 0, ARGV[i])
end
redis.call('SADD', KEYS[1], ns)
touch(base, tonumber(ARGV[3]))
return 1
""", "touch")

# KEYS[1] ns-set; ARGV base, ns, ttl, then "range" <max lex> <count> | "ids" <checkpoint id>...
# Returns first a status list: the mode ("range", "ids", or "capped" when a range met ORPHAN_CAP ids without a
# record and stopped), then the ids in the index that have no record (skipped in a range; in "ids" mode,
# requested ones). Then, per checkpoint found, newest first: id, record, links (nil if missing), blobs, write
# fields, write values. A read that finds a checkpoint restarts the thread's TTL (when the saver has one): a
# session in use never expires under it.
ORPHAN_CAP = 100
LOAD = Script("load", r"""
local base, ns = ARGV[1], ARGV[2]
local ckey, status, out, seen = base .. 'c:' .. ns, {ARGV[4]}, {}, false
out[1] = status
local function emit(cid)
  local rec = redis.call('HGET', base .. 'cp:' .. ns, cid)
  if not rec then return false end
  local links = redis.call('HGET', base .. 'v:' .. ns, cid)
  local fields, blobs, wvalues = blob_fields(links or ''), {}, {}
  if #fields > 0 then blobs = redis.call('HMGET', base .. 'b:' .. ns, unpack(fields)) end
  local wfields = writes_of(base, ns, cid)
  if #wfields > 0 then wvalues = redis.call('HMGET', base .. 'w:' .. ns, unpack(wfields)) end
  for _, x in ipairs({cid, rec, links or false, blobs, wfields, wvalues}) do out[#out + 1] = x end
  seen = true
  return true
end
if ARGV[4] == 'range' then
  -- an id without a record (never written by PUT, which adds the id last) is skipped, and reported
  local top, want, found = ARGV[5], tonumber(ARGV[6]), 0
  while found < want do
    local ids = redis.call('ZREVRANGEBYLEX', ckey, top, '-', 'LIMIT', 0, want - found)
    if #ids == 0 then break end
    for _, cid in ipairs(ids) do
      if emit(cid) then found = found + 1 else status[#status + 1] = cid end
    end
    if #status > ORPHAN_CAP then status[1] = 'capped'; break end
    top = '(' .. ids[#ids]
  end
else
  for i = 5, #ARGV do
    if not emit(ARGV[i]) and redis.call('ZSCORE', ckey, ARGV[i]) then status[#status + 1] = ARGV[i] end
  end
end
if seen then touch(base, tonumber(ARGV[3])) end
return out
""".replace("ORPHAN_CAP", str(ORPHAN_CAP)), "blob_fields", "writes_of", "touch")

# KEYS[1] ns-set; ARGV base, ns, checkpoint id. Drops one checkpoint, its writes and the blobs no other uses.
DROP_CHECKPOINT = Script("drop_checkpoint", r"""
local base, ns, cid = ARGV[1], ARGV[2], ARGV[3]
local known = redis.call('ZSCORE', base .. 'c:' .. ns, cid) or redis.call('HEXISTS', base .. 'cp:' .. ns, cid) == 1
drop_checkpoint(base, ns, cid)
gc_blobs(base, ns)
gc_runs(base)
return known and 1 or 0
""", "drop_checkpoint", "gc_blobs", "gc_runs")

# KEYS[1] ns-set; ARGV base
DELETE_THREAD = Script("delete_thread", r"""
local base = ARGV[1]
for _, ns in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  for _, kind in ipairs(KINDS) do redis.call('UNLINK', base .. kind .. ns) end
end
redis.call('UNLINK', KEYS[1], base .. 'runs')
return 1
""", "KINDS")

# KEYS[1] runs index; ARGV base, run ids...
DELETE_RUNS = Script("delete_runs", r"""
local base, touched, n = ARGV[1], {}, 0
for i = 2, #ARGV do
  local members = redis.call('ZRANGEBYLEX', KEYS[1], '[' .. ARGV[i] .. '\0', '(' .. ARGV[i] .. '\1')
  for _, m in ipairs(members) do
    local p = split0(m)
    drop_checkpoint(base, p[2], p[3])
    touched[p[2]] = true
    n = n + 1
  end
  if #members > 0 then chunked('ZREM', KEYS[1], members) end
end
for ns in pairs(touched) do gc_blobs(base, ns) end
return n
""", "split0", "drop_checkpoint", "gc_blobs")

# KEYS[1] ns-set; ARGV base, ns, newest kept id, then per kept checkpoint: its id, n, and the n DeltaChannel
# names not snapshotted at it. Keeps those checkpoints (their writes, the blobs they use) plus the ancestors
# their DeltaChannels are rebuilt from (up to a stored value for each); drops every other checkpoint up to
# the newest kept one. Checkpoints newer than that (written meanwhile) are left alone. Returns the number
# dropped.
PRUNE = Script("prune", r"""
local base, ns, newest = ARGV[1], ARGV[2], ARGV[3]
local vkey, bkey = base .. 'v:' .. ns, base .. 'b:' .. ns
local keep, i = {}, 4
while i <= #ARGV do
  local cursor, n = ARGV[i], tonumber(ARGV[i + 1])
  local need, pending = {}, 0
  for j = i + 2, i + 1 + n do need[ARGV[j]] = true; pending = pending + 1 end
  i = i + 2 + n
  keep[cursor] = true
  while pending > 0 do
    local parts = split0(redis.call('HGET', vkey, cursor) or '')
    for k = 2, #parts - 1, 2 do
      if need[parts[k]] then
        local blob = redis.call('HGET', bkey, parts[k] .. '\0' .. parts[k + 1])
        if blob and string.sub(blob, 1, 6) ~= 'empty\0' then need[parts[k]] = nil; pending = pending - 1 end
      end
    end
    cursor = parts[1]
    if pending == 0 or not cursor or cursor == '' then break end
    keep[cursor] = true
  end
end
local dropped = 0
for _, cid in ipairs(redis.call('ZRANGEBYLEX', base .. 'c:' .. ns, '-', '[' .. newest)) do
  if not keep[cid] then drop_checkpoint(base, ns, cid); dropped = dropped + 1 end
end
gc_blobs(base, ns)
gc_runs(base)
return dropped
""", "split0", "drop_checkpoint", "gc_blobs", "gc_runs")

# KEYS[1] source ns-set, KEYS[2] target ns-set; ARGV source base, target base, ttl. Merges into the target.
COPY_THREAD = Script("copy_thread", r"""
local src, dst = ARGV[1], ARGV[2]
local function copy_hash(from, to)
  chunked('HSET', to, redis.call('HGETALL', from))
end
local function copy_zset(from, to)
  local args = {}
  for _, m in ipairs(redis.call('ZRANGE', from, 0, -1)) do args[#args + 1] = 0; args[#args + 1] = m end
  chunked('ZADD', to, args)
end
local namespaces = redis.call('SMEMBERS', KEYS[1])
for _, ns in ipairs(namespaces) do
  for _, kind in ipairs({'cp:', 'v:', 'b:', 'w:'}) do copy_hash(src .. kind .. ns, dst .. kind .. ns) end
  copy_zset(src .. 'wi:' .. ns, dst .. 'wi:' .. ns)
  copy_zset(src .. 'c:' .. ns, dst .. 'c:' .. ns)
  redis.call('SADD', KEYS[2], ns)
end
copy_zset(src .. 'runs', dst .. 'runs')
touch(dst, tonumber(ARGV[3]))
return #namespaces
""", "chunked", "touch")

# KEYS[1] ns-set; ARGV base, ns, target checkpoint id ('' for the newest), most ancestors to visit, mode, channels...
# LangGraph's `get_delta_channel_history` in one round trip: walks the target's parent chain (the target's own
# writes excluded: they are pending for its next step) and, per ancestor, newest first, returns its id, the write
# fields and values of the wanted channels, and the channels whose value it stores (name, blob) — a channel's walk
# ends there. Mode 'needed' (a prefetch) walks only for the channels LangGraph will ask about: not one the target
# stores a value of, nor one it has no version of; mode 'all' for every channel named. Status first: the state
# ('ok', or why the walk stopped early: 'capped' (more ancestors than allowed), 'cycle' (a parent chain that loops:
# crafted or damaged links), 'missing' (a parent without a channel list)), the target id, the id at fault.
MAX_DELTA_WALK = 20000
DELTA_HISTORY = Script("delta_history", r"""
local base, ns, target, cap, needed = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5] == 'needed'
local vkey, bkey, wkey = base .. 'v:' .. ns, base .. 'b:' .. ns, base .. 'w:' .. ns
local want, pending = {}, 0
for i = 6, #ARGV do
  if not want[ARGV[i]] then want[ARGV[i]] = true; pending = pending + 1 end
end
if target == '' then target = redis.call('ZREVRANGEBYLEX', base .. 'c:' .. ns, '+', '-', 'LIMIT', 0, 1)[1] or '' end
local status, out, visited, walked = {'ok', target, ''}, {}, {}, 0
out[1] = status
local own, present = split0(redis.call('HGET', vkey, target) or ''), {}
for k = 2, #own - 1, 2 do
  present[own[k]] = true
  if needed and want[own[k]] then
    local blob = redis.call('HGET', bkey, own[k] .. '\0' .. own[k + 1])
    if blob and string.sub(blob, 1, 6) ~= 'empty\0' then want[own[k]] = nil; pending = pending - 1 end
  end
end
for name in pairs(want) do  -- a channel without a version at the target was never written: nothing to walk for
  if needed and #own > 0 and not present[name] then want[name] = nil; pending = pending - 1 end
end
local cursor = own[1]
while pending > 0 and cursor and cursor ~= '' do
  if visited[cursor] then status[1] = 'cycle'; break end
  visited[cursor] = true
  walked = walked + 1
  if walked > cap then status[1] = 'capped'; break end
  local links = redis.call('HGET', vkey, cursor)
  if not links then status[1] = 'missing'; status[3] = cursor; break end
  local parts = split0(links)
  local fields, values = {}, {}
  local wfields = writes_of(base, ns, cursor)
  if #wfields > 0 then
    for j, v in ipairs(redis.call('HMGET', wkey, unpack(wfields))) do
      if v then  -- "<task path>\0<channel>\0..."
        local a = string.find(v, '\0', 1, true)
        local b = a and string.find(v, '\0', a + 1, true)
        if b and want[string.sub(v, a + 1, b - 1)] then fields[#fields + 1] = wfields[j]; values[#values + 1] = v end
      end
    end
  end
  local seeds = {}
  for k = 2, #parts - 1, 2 do
    if want[parts[k]] then
      local blob = redis.call('HGET', bkey, parts[k] .. '\0' .. parts[k + 1])
      if blob and string.sub(blob, 1, 6) ~= 'empty\0' then
        seeds[#seeds + 1] = parts[k]; seeds[#seeds + 1] = blob
        want[parts[k]] = nil; pending = pending - 1
      end
    end
  end
  out[#out + 1] = {cursor, fields, values, seeds}
  cursor = parts[1]
end
return out
""", "split0", "writes_of")
