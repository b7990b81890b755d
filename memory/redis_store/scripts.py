"""Lua scripts that make each store operation one atomic round trip (key layout in `layout.py`).

Key names are built in-script from the store's prefix, so the store needs a standalone (or Sentinel)
Redis, like the checkpointer's wire; Redis Cluster is not supported. Timestamps come from the server's
TIME, so items written by several processes order by one clock, and expiry (PEXPIRE) and the expiry
index agree. What they read is Redis content: an item, or an index entry, that is not as PUT writes it is
passed back for the reader to report (an item) or dropped (an index entry), never a Lua error.
"""

from __future__ import annotations

from reactgraph.memory.redis_checkpoint.scripts import Script

# now_us / now_ms: the server clock. sweep: drop index entries of items whose key Redis has expired.
_PRELUDE = r"""
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function sweep(P)
  local due = redis.call('ZRANGEBYSCORE', P .. 'exp', '-inf', math.floor(now_us() / 1000), 'LIMIT', 0, 1000)
  for _, m in ipairs(due) do
    local cut = string.find(m, '\0', 1, true)
    if not cut then
      redis.call('ZREM', P .. 'exp', m)  -- not a "<ns>\0<key>" we wrote: it names no item
    elseif redis.call('EXISTS', P .. 'i:' .. m) == 0 then
      local ns, key = string.sub(m, 1, cut - 1), string.sub(m, cut + 1)
      local u = P .. 'u:' .. ns
      redis.call('ZREM', u, key)
      if redis.call('ZCARD', u) == 0 then redis.call('ZREM', P .. 'ns', ns .. '.') end
      redis.call('ZREM', P .. 'exp', m)
    end
  end
end
-- a TTL in minutes as PUT writes it: a positive, finite number (NaN fails n > 0)
local function minutes_ok(text)
  local n = tonumber(text)
  return n ~= nil and n > 0 and n < math.huge
end
-- an item's created stamp and TTL text ('' = none); nil when its header is garbled
local function header(blob)
  local a = string.find(blob, '\0', 1, true)
  local b = a and string.find(blob, '\0', a + 1, true)
  local c = b and string.find(blob, '\0', b + 1, true)
  if not c then return nil end
  local created, ttl = string.sub(blob, 1, a - 1), string.sub(blob, b + 1, c - 1)
  if #created > 19 or not string.match(created, '^%d+$') or (ttl ~= '' and not minutes_ok(ttl)) then return nil end
  return created, ttl
end
-- an item's bytes, false when there is none, '' for a key of another type (the reader reports it)
local function item_of(name)
  local blob = redis.pcall('GET', name)
  if type(blob) == 'table' and blob.err then return '' end
  return blob
end
-- a namespace's index u: lives as long as its longest-lived item: PTTL -1 means it holds an item without a TTL
local function ms_of(minutes)
  return math.max(1, math.floor(tonumber(minutes) * 60000))
end
local function expire(P, member, minutes)
  local ms = ms_of(minutes)
  if redis.call('PEXPIRE', P .. 'i:' .. member, ms) == 1 then
    redis.call('ZADD', P .. 'exp', math.floor(now_us() / 1000) + ms, member)
    local u = P .. 'u:' .. string.sub(member, 1, string.find(member, '\0', 1, true) - 1)
    local left = redis.call('PTTL', u)
    if left >= 0 and left < ms then redis.call('PEXPIRE', u, ms) end
  end
end
"""


def _script(name: str, body: str) -> Script:
    return Script(name, _PRELUDE + body)


# KEYS[1] the item; ARGV prefix, namespace text, key, JSON value, TTL in minutes ('' = none).
# The namespace's index keeps the newest item on top: a put within the same microsecond as the newest
# one still sorts above it.
PUT = _script("store_put", r"""
local P, ns, key = ARGV[1], ARGV[2], ARGV[3]
local u = P .. 'u:' .. ns
local now = now_us()
local top = redis.call('ZREVRANGE', u, 0, 0, 'WITHSCORES')
if top[2] and tonumber(top[2]) >= now then now = tonumber(top[2]) + 1 end
local stamp = string.format('%.0f', now)
local created = stamp
local old = item_of(KEYS[1])
if old then created = header(old) or stamp end  -- a garbled item is replaced as if new
redis.call('SET', KEYS[1], created .. '\0' .. stamp .. '\0' .. ARGV[5] .. '\0' .. ARGV[4])
local fresh = redis.call('EXISTS', u) == 0
redis.call('ZADD', u, stamp, key)
redis.call('ZADD', P .. 'ns', 0, ns .. '.')
if ARGV[5] ~= '' then
  if fresh then redis.call('PEXPIRE', u, ms_of(ARGV[5])) end
  expire(P, ns .. '\0' .. key, ARGV[5])
else
  redis.call('ZREM', P .. 'exp', ns .. '\0' .. key)
  redis.call('PERSIST', u)
end
return 1
""")

# KEYS[1] the item; ARGV prefix, namespace text, key
DELETE = _script("store_delete", r"""
local P, ns, key = ARGV[1], ARGV[2], ARGV[3]
local u = P .. 'u:' .. ns
redis.call('DEL', KEYS[1])
redis.call('ZREM', u, key)
redis.call('ZREM', P .. 'exp', ns .. '\0' .. key)
if redis.call('ZCARD', u) == 0 then redis.call('ZREM', P .. 'ns', ns .. '.') end
return 1
""")

# KEYS[1] the item; ARGV prefix, "<namespace text>\0<key>", refresh ('1' restarts the item's TTL)
GET = _script("store_get", r"""
local blob = item_of(KEYS[1])
if blob and ARGV[3] == '1' then
  local _, ttl = header(blob)
  if ttl and ttl ~= '' then expire(ARGV[1], ARGV[2], ttl) end
end
return blob
""")

# KEYS[1] the namespace index; ARGV prefix, lex min, lex max, items per namespace (0 = all).
# Returns "<namespace text>\\0<key length>\\0<key><blob>" (layout.decode_hit) for the newest items of every
# namespace in the range; the blob is '' for a key of another type.
SEARCH = _script("store_search", r"""
local P, per = ARGV[1], tonumber(ARGV[4])
sweep(P)
local out = {}
for _, m in ipairs(redis.call('ZRANGEBYLEX', KEYS[1], ARGV[2], ARGV[3])) do
  local ns = string.sub(m, 1, -2)
  local keys = redis.call('ZREVRANGE', P .. 'u:' .. ns, 0, per - 1)
  for i = 1, #keys, 1000 do
    local names = {}
    for j = i, math.min(i + 999, #keys) do names[#names + 1] = P .. 'i:' .. ns .. '\0' .. keys[j] end
    local blobs = redis.call('MGET', unpack(names))
    for j = 1, #names do
      -- one reply element per item (RESP parsing is the client's main cost); MGET answers nil for an
      -- expired item and for a key of another type, which is still there
      local blob = blobs[j] or (redis.call('EXISTS', names[j]) == 1 and '')
      local key = keys[i + j - 1]
      if blob then out[#out + 1] = ns .. '\0' .. #key .. '\0' .. key .. blob end
    end
  end
end
return out
""")

# KEYS[1] the namespace index; ARGV prefix, lex min, lex max. Returns "<namespace text>." members.
LIST = _script("store_list", r"""
sweep(ARGV[1])
return redis.call('ZRANGEBYLEX', KEYS[1], ARGV[2], ARGV[3])
""")

# KEYS[1] the expiry index; ARGV prefix, then ("<namespace text>\0<key>", TTL minutes) pairs
TOUCH = _script("store_touch", r"""
for i = 2, #ARGV, 2 do expire(ARGV[1], ARGV[i], ARGV[i + 1]) end
return 1
""")
