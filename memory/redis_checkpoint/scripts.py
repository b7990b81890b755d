"""Lua scripts that make each checkpoint operation one atomic round trip (layout in `layout.py`)."""

from __future__ import annotations

import hashlib

# Shared helpers, each script gets only those it uses (defining the rest costs the server on every call).
# Key names are built in-script from the thread's base: every key of a thread shares its hash tag, so a
# script stays on one slot; KEYS[1] is always a real key of that thread so proxies and clusters route
# the call to the right node.
_HELPERS: dict[str, str] = {
    "KINDS": "local KINDS = {'c:', 'cp:', 'v:', 'b:', 'w:', 'wi:', 'pi:', 'p:'}",
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
    # Lua's own < on strings follows the server's locale (strcoll); ids are ordered by their bytes, as ZSETs do
    "lex_lt": r"""
local function lex_lt(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end""",
    # the sealed pages whose id range holds `cid` (members "<newest>\0<oldest>\0<count>\0<seq>")
    "pages_of": r"""
local function pages_of(base, ns, cid)
  local out = {}
  for _, m in ipairs(redis.call('ZRANGEBYLEX', base .. 'pi:' .. ns, '[' .. cid, '+')) do
    if not lex_lt(cid, split0(m)[2]) then out[#out + 1] = m end
  end
  return out
end""",
    # writes whose checkpoint is not on its own (sealed since, or never put): a page's late writes
    "orphan_writes": r"""
local function orphan_writes(base, ns)
  local fields, known = {}, {}
  for _, f in ipairs(redis.call('ZRANGE', base .. 'wi:' .. ns, 0, -1)) do
    local cid = string.sub(f, 1, (string.find(f, '\0', 1, true) or (#f + 1)) - 1)
    if known[cid] == nil then known[cid] = redis.call('HEXISTS', base .. 'cp:' .. ns, cid) == 1 end
    if not known[cid] then fields[#fields + 1] = f end
  end
  if #fields == 0 then return false end
  return {'w', fields, redis.call('HMGET', base .. 'w:' .. ns, unpack(fields))}
end""",
    # one checkpoint on its own, as stored: {'c', id, record, links, blobs, write fields, write values}
    "raw_checkpoint": r"""
local function raw_checkpoint(base, ns, cid)
  local rec = redis.call('HGET', base .. 'cp:' .. ns, cid)
  if not rec then return nil end
  local links = redis.call('HGET', base .. 'v:' .. ns, cid)
  local fields, blobs, wvalues = blob_fields(links or ''), {}, {}
  if #fields > 0 then blobs = redis.call('HMGET', base .. 'b:' .. ns, unpack(fields)) end
  local wfields = writes_of(base, ns, cid)
  if #wfields > 0 then wvalues = redis.call('HMGET', base .. 'w:' .. ns, unpack(wfields)) end
  return {'c', cid, rec, links or false, blobs, wfields, wvalues}
end""",
    # what a sealer read of a checkpoint (record, channel list, writes; lengths keep it exact), so that the seal sees
    # whether it changed since: pages.digest computes the same in Python
    "digest": r"""
local function digest(base, ns, cid)
  local rec = redis.call('HGET', base .. 'cp:' .. ns, cid)
  if not rec then return '' end
  local parts = {}
  local function add(x) x = x or ''; parts[#parts + 1] = #x .. ':' .. x end
  add(rec)
  add(redis.call('HGET', base .. 'v:' .. ns, cid))
  local wfields = writes_of(base, ns, cid)
  if #wfields > 0 then
    local wvalues = redis.call('HMGET', base .. 'w:' .. ns, unpack(wfields))
    for i = 1, #wfields do add(wfields[i]); add(wvalues[i]) end
  end
  return redis.sha1hex(table.concat(parts))
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
    # a run member "<run>\0<ns>\0<id>" goes with its checkpoint; "<run>\0<ns>\0" (sealed ones) with the pages
    "gc_runs": r"""
local function gc_runs(base)
  local dead, paged = {}, {}
  for _, m in ipairs(redis.call('ZRANGE', base .. 'runs', 0, -1)) do
    local p = split0(m)
    if p[3] == '' or p[3] == nil then
      if paged[p[2]] == nil then paged[p[2]] = redis.call('ZCARD', base .. 'pi:' .. p[2]) > 0 end
      if not paged[p[2]] then dead[#dead + 1] = m end
    elseif not redis.call('ZSCORE', base .. 'c:' .. p[2], p[3]) then dead[#dead + 1] = m end
  end
  if #dead > 0 then chunked('ZREM', base .. 'runs', dead) end
end""",
    # a page copied in from another thread: a seq of its new thread's; the same page copied again is kept once
    "add_page": r"""
local function add_page(dst, ns, member, data)
  local p = split0(member)
  local head = p[1] .. '\0' .. p[2] .. '\0' .. p[3] .. '\0'
  for _, m in ipairs(redis.call('ZRANGEBYLEX', dst .. 'pi:' .. ns, '[' .. head, '(' .. head .. '\255')) do
    if redis.call('HGET', dst .. 'p:' .. ns, m) == data then return end
  end
  local seq = redis.call('HINCRBY', dst .. 'p:' .. ns, '', 1)
  redis.call('HSET', dst .. 'p:' .. ns, head .. seq, data)
  redis.call('ZADD', dst .. 'pi:' .. ns, 0, head .. seq)
end""",
}
_NEEDS = {"blob_fields": ("split0",), "touch": ("KINDS",), "drop_checkpoint": ("writes_of", "chunked"),
          "gc_blobs": ("blob_fields", "chunked"), "gc_runs": ("split0", "chunked"), "pages_of": ("split0", "lex_lt"),
          "raw_checkpoint": ("blob_fields", "writes_of"), "digest": ("writes_of",), "add_page": ("split0",)}


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
# Returns the number of the namespace's checkpoints on their own, or the blob fields of unchanged channels that are
# not stored (nothing written then).
PUT = Script("put", r"""
local base, ns, cid = ARGV[1], ARGV[2], ARGV[3]
-- the values of channels it did not change must be stored already; a fork from a sealed checkpoint shares values
-- that now live only in a page: then nothing is written, and the saver sends them along
local given, missing = {}, {}
for i = 8, #ARGV, 2 do given[ARGV[i]] = true end
for _, f in ipairs(blob_fields(ARGV[5])) do
  if not given[f] and redis.call('HEXISTS', base .. 'b:' .. ns, f) == 0 then missing[#missing + 1] = f end
end
if #missing > 0 then return missing end
if #ARGV > 7 then chunked('HSET', base .. 'b:' .. ns, ARGV, 8) end
redis.call('HSET', base .. 'cp:' .. ns, cid, ARGV[4])
redis.call('HSET', base .. 'v:' .. ns, cid, ARGV[5])
redis.call('SADD', KEYS[1], ns)
if ARGV[7] ~= '' then redis.call('ZADD', base .. 'runs', 0, ARGV[7]) end
-- the id enters the index last: if anything above failed, the checkpoint never becomes visible
redis.call('ZADD', base .. 'c:' .. ns, 0, cid)
touch(base, tonumber(ARGV[6]))
return redis.call('ZCARD', base .. 'c:' .. ns)  -- how many are on their own: the saver seals a page past page_size
""", "blob_fields", "chunked", "touch")

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

# KEYS[1] ns-set; ARGV base, ns, ttl, then "range" <lex bound> | "ids" <checkpoint id>... | "pages" <member>...
# Returns first a status list: the mode ("range", "ids", "pages", or "capped" when a range met ORPHAN_CAP ids
# without a record and stopped), then the ids in the index that have no record (skipped in a range; in "ids"
# mode, requested ones). Then entries: {'c', id, record, links (false if missing), blobs, write fields, write
# values} for a checkpoint on its own, {'p', page member, page bytes} for a sealed page, {'w', write fields,
# write values} for writes kept apart from their page (put after it was sealed). A range returns the newest
# checkpoint on its own below the bound, and the pages that may hold a newer one below it (the reader picks);
# "ids" returns each id on its own, else the pages that may hold it. A read that finds something restarts the
# thread's TTL (when the saver has one): a session in use never expires under it.
ORPHAN_CAP = 100
LOAD = Script("load", r"""
local base, ns, mode = ARGV[1], ARGV[2], ARGV[4]
local ckey, pkey, status, out, sent = base .. 'c:' .. ns, base .. 'pi:' .. ns, {mode}, {}, {}
out[1] = status
local function own(cid)
  local e = raw_checkpoint(base, ns, cid)
  if e then out[#out + 1] = e end
  return e ~= nil
end
local function page(m)
  if sent[m] then return end
  sent[m] = true
  out[#out + 1] = {'p', m, redis.call('HGET', base .. 'p:' .. ns, m) or false}
end
if mode == 'range' then
  -- an id without a record (never written by PUT, which adds the id last) is skipped, and reported
  local bound, top, found = ARGV[5], ARGV[5], nil
  while true do
    local ids = redis.call('ZREVRANGEBYLEX', ckey, top, '-', 'LIMIT', 0, 1)
    if #ids == 0 then break end
    if own(ids[1]) then found = ids[1]; break end
    status[#status + 1] = ids[1]
    if #status > ORPHAN_CAP then status[1] = 'capped'; break end
    top = '(' .. ids[1]
  end
  local below = redis.call('ZREVRANGEBYLEX', pkey, bound, '-', 'LIMIT', 0, 1)[1]
  if below and found and not lex_lt(found, split0(below)[1]) then below = nil end
  if below then page(below) end
  if bound ~= '+' then  -- pages that reach past the bound may hold ids below it too
    local id = string.sub(bound, 2)
    for _, m in ipairs(redis.call('ZRANGEBYLEX', pkey, '[' .. id, '+')) do
      if lex_lt(split0(m)[2], id) then page(m) end
    end
  end
elseif mode == 'ids' then
  for i = 5, #ARGV do
    if not own(ARGV[i]) then
      local holders = pages_of(base, ns, ARGV[i])
      for _, m in ipairs(holders) do page(m) end
      local late = writes_of(base, ns, ARGV[i])
      if #late > 0 then out[#out + 1] = {'w', late, redis.call('HMGET', base .. 'w:' .. ns, unpack(late))} end
      if #holders == 0 and redis.call('ZSCORE', ckey, ARGV[i]) then status[#status + 1] = ARGV[i] end
    end
  end
else
  for i = 5, #ARGV do page(ARGV[i]) end
end
if mode ~= 'ids' and next(sent) then
  local late = orphan_writes(base, ns)
  if late then out[#out + 1] = late end
end
if #out > 1 then touch(base, tonumber(ARGV[3])) end
return out
""".replace("ORPHAN_CAP", str(ORPHAN_CAP)), "raw_checkpoint", "pages_of", "orphan_writes", "touch")

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

# KEYS[1] runs index; ARGV base, run ids... Drops those runs' checkpoints on their own; returns how many, then
# the namespaces whose pages hold checkpoints of theirs (the caller rewrites those pages, then drops the markers).
DELETE_RUNS = Script("delete_runs", r"""
local base, touched, n, paged = ARGV[1], {}, 0, {}
for i = 2, #ARGV do
  local members = redis.call('ZRANGEBYLEX', KEYS[1], '[' .. ARGV[i] .. '\0', '(' .. ARGV[i] .. '\1')
  local dropped = {}
  for _, m in ipairs(members) do
    local p = split0(m)
    if p[3] == '' then paged[p[2]] = true
    else
      drop_checkpoint(base, p[2], p[3])
      touched[p[2]] = true
      dropped[#dropped + 1] = m
      n = n + 1
    end
  end
  if #dropped > 0 then chunked('ZREM', KEYS[1], dropped) end
end
for ns in pairs(touched) do gc_blobs(base, ns) end
local out = {n}
for ns in pairs(paged) do out[#out + 1] = ns end
return out
""", "split0", "drop_checkpoint", "gc_blobs")

# KEYS[1] ns-set; ARGV base, ns, ids of checkpoints on their own to drop (the caller chose them: what prune keeps
# is the newest ones and what they are rebuilt from, on their own or in pages). Returns the number dropped.
PRUNE = Script("prune", r"""
local base, ns, dropped = ARGV[1], ARGV[2], 0
for i = 3, #ARGV do
  if redis.call('HEXISTS', base .. 'cp:' .. ns, ARGV[i]) == 1 or redis.call('ZSCORE', base .. 'c:' .. ns, ARGV[i]) then
    dropped = dropped + 1
  end
  drop_checkpoint(base, ns, ARGV[i])
end
gc_blobs(base, ns)
gc_runs(base)
return dropped
""", "drop_checkpoint", "gc_blobs", "gc_runs")

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
  for _, m in ipairs(redis.call('ZRANGE', src .. 'pi:' .. ns, 0, -1)) do
    local data = redis.call('HGET', src .. 'p:' .. ns, m)
    if data then add_page(dst, ns, m, data) end
  end
  copy_zset(src .. 'c:' .. ns, dst .. 'c:' .. ns)
  redis.call('SADD', KEYS[2], ns)
end
copy_zset(src .. 'runs', dst .. 'runs')
touch(dst, tonumber(ARGV[3]))
return #namespaces
""", "chunked", "add_page", "touch")

# KEYS[1] ns-set; ARGV base, ns, target checkpoint id ('' for the newest), most ancestors to visit, mode, channels...
# LangGraph's `get_delta_channel_history` in one round trip: walks the target's parent chain (the target's own
# writes excluded: they are pending for its next step) and, per ancestor, newest first, returns {'a', its id, the
# write fields and values of the wanted channels, the channels whose value it stores (name, blob)} — a channel's
# walk ends there. Mode 'needed' (a prefetch) walks only for the channels LangGraph will ask about: not one the
# target stores a value of, nor one it has no version of; mode 'all' for every channel named; mode 'from' walks
# from the target itself, its writes included (a reader going on with a walk it began in pages).
# Status first: the state ('ok'; 'paged' when the walk reached a sealed checkpoint: the reader goes on in the
# pages returned after the ancestors, {'p', member, bytes}, with {'w', fields, values} of writes kept apart from
# their page; or why it stopped early: 'capped' (more ancestors than allowed), 'cycle' (a parent chain that loops:
# crafted or damaged links), 'missing' (a parent that is nowhere)), the target id, the id at fault or to go on
# from, and for 'paged' whether that id is the target or an ancestor.
MAX_DELTA_WALK = 20000
PAGES_AHEAD = 4  # pages older than the one a walk enters, sent along: a walk goes back in time
DELTA_HISTORY = Script("delta_history", r"""
local base, ns, target, cap, mode = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local needed = mode == 'needed'
local vkey, bkey, wkey, pkey = base .. 'v:' .. ns, base .. 'b:' .. ns, base .. 'w:' .. ns, base .. 'pi:' .. ns
local want, pending = {}, 0
for i = 6, #ARGV do
  if not want[ARGV[i]] then want[ARGV[i]] = true; pending = pending + 1 end
end
if target == '' then
  target = redis.call('ZREVRANGEBYLEX', base .. 'c:' .. ns, '+', '-', 'LIMIT', 0, 1)[1] or ''
  local newest = redis.call('ZREVRANGEBYLEX', pkey, '+', '-', 'LIMIT', 0, 1)[1]
  if newest and lex_lt(target, split0(newest)[1]) then target = split0(newest)[1] end
end
local status, out, visited, walked = {'ok', target, '', ''}, {}, {}, 0
out[1] = status
local function paged(cid, kind)  -- the walk goes on in the pages that hold cid, and the ones before them
  local holders = pages_of(base, ns, cid)
  if #holders == 0 then return false end
  status[1], status[3], status[4] = 'paged', cid, kind
  for _, m in ipairs(redis.call('ZREVRANGEBYLEX', pkey, '(' .. cid, '-', 'LIMIT', 0, PAGES_AHEAD)) do
    holders[#holders + 1] = m
  end
  for _, m in ipairs(holders) do out[#out + 1] = {'p', m, redis.call('HGET', base .. 'p:' .. ns, m) or false} end
  local late = orphan_writes(base, ns)
  if late then out[#out + 1] = late end
  return true
end
local cursor = target
if mode ~= 'from' then
  local links = redis.call('HGET', vkey, target)
  if not links and target ~= '' and paged(target, 'target') then return out end
  local own, present = split0(links or ''), {}
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
  cursor = own[1]
end
while pending > 0 and cursor and cursor ~= '' do
  if visited[cursor] then status[1] = 'cycle'; break end
  visited[cursor] = true
  walked = walked + 1
  if walked > cap then status[1] = 'capped'; break end
  local links = redis.call('HGET', vkey, cursor)
  if not links then
    if not paged(cursor, 'ancestor') then status[1] = 'missing'; status[3] = cursor end
    break
  end
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
  out[#out + 1] = {'a', cursor, fields, values, seeds}
  cursor = parts[1]
end
return out
""".replace("PAGES_AHEAD", str(PAGES_AHEAD)), "split0", "writes_of", "lex_lt", "pages_of", "orphan_writes")

# KEYS[1] ns-set; ARGV base, ns, most to read, how many newest stay on their own. The oldest checkpoints on their
# own, for a page to be sealed from: {{id, record, links (false if missing), write fields, write values}...}, then the
# blob fields they use and their values, each once (a blob is shared by every checkpoint at that channel version).
SEAL_READ = Script("seal_read", r"""
local base, ns = ARGV[1], ARGV[2]
local ckey, found, fields, seen = base .. 'c:' .. ns, {}, {}, {}
local n = math.min(tonumber(ARGV[3]), redis.call('ZCARD', ckey) - tonumber(ARGV[4]))
if n <= 0 then return {found, fields, {}} end
for _, cid in ipairs(redis.call('ZRANGEBYLEX', ckey, '-', '+', 'LIMIT', 0, n)) do
  local rec = redis.call('HGET', base .. 'cp:' .. ns, cid)
  if rec then
    local links = redis.call('HGET', base .. 'v:' .. ns, cid)
    local wfields, wvalues = writes_of(base, ns, cid), {}
    if #wfields > 0 then wvalues = redis.call('HMGET', base .. 'w:' .. ns, unpack(wfields)) end
    found[#found + 1] = {cid, rec, links or false, wfields, wvalues}
    for _, f in ipairs(blob_fields(links or '')) do
      if not seen[f] then seen[f] = true; fields[#fields + 1] = f end
    end
  end
end
local blobs = {}
for i = 1, #fields, 500 do
  for _, b in ipairs(redis.call('HMGET', base .. 'b:' .. ns, unpack(fields, i, math.min(i + 499, #fields)))) do
    blobs[#blobs + 1] = b
  end
end
return {found, fields, blobs}
""", "blob_fields", "writes_of")

# KEYS[1] ns-set; ARGV base, ns, ttl, page bytes, its newest id, oldest id, count, then (id, digest) per checkpoint
# in it. If each is still as SEAL_READ read it (pages.digest), stores the page and drops them as checkpoints on
# their own (the runs index then names their run once per namespace); else changes nothing. Returns 1 if sealed.
SEAL_WRITE = Script("seal_write", r"""
local base, ns = ARGV[1], ARGV[2]
local sealed, runs = {}, base .. 'runs'
for i = 8, #ARGV, 2 do
  if digest(base, ns, ARGV[i]) ~= ARGV[i + 1] then return 0 end
  sealed[ARGV[i]] = true
end
local seq = redis.call('HINCRBY', base .. 'p:' .. ns, '', 1)
local member = ARGV[5] .. '\0' .. ARGV[6] .. '\0' .. ARGV[7] .. '\0' .. seq
redis.call('HSET', base .. 'p:' .. ns, member, ARGV[4])
redis.call('ZADD', base .. 'pi:' .. ns, 0, member)
for cid in pairs(sealed) do drop_checkpoint(base, ns, cid) end
for _, m in ipairs(redis.call('ZRANGE', runs, 0, -1)) do
  local p = split0(m)
  if p[2] == ns and sealed[p[3]] then
    redis.call('ZREM', runs, m)
    redis.call('ZADD', runs, 0, p[1] .. '\0' .. ns .. '\0')
  end
end
gc_blobs(base, ns)
touch(base, tonumber(ARGV[3]))
return 1
""", "digest", "drop_checkpoint", "gc_blobs", "touch")

# KEYS[1] ns-set; ARGV base, ns, ttl, then per page: its member, the SHA1 of its bytes as read, its new bytes ('' to
# drop it), their newest id, oldest id and count. Changes nothing unless every page is still as read (returns 0);
# a rewritten page keeps its seq.
REWRITE_PAGES = Script("rewrite_pages", r"""
local base, ns = ARGV[1], ARGV[2]
local hkey, ikey = base .. 'p:' .. ns, base .. 'pi:' .. ns
for i = 4, #ARGV, 6 do
  local data = redis.call('HGET', hkey, ARGV[i])
  if not data or redis.sha1hex(data) ~= ARGV[i + 1] then return 0 end
end
for i = 4, #ARGV, 6 do
  redis.call('HDEL', hkey, ARGV[i])
  redis.call('ZREM', ikey, ARGV[i])
  if ARGV[i + 2] ~= '' then
    local member = ARGV[i + 3] .. '\0' .. ARGV[i + 4] .. '\0' .. ARGV[i + 5] .. '\0' .. split0(ARGV[i])[4]
    redis.call('HSET', hkey, member, ARGV[i + 2])
    redis.call('ZADD', ikey, 0, member)
  end
end
gc_runs(base)
touch(base, tonumber(ARGV[3]))
return 1
""", "split0", "gc_runs", "touch")
