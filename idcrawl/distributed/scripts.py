"""The Lua scripts that make a job's lanes shared and atomic in Redis.

Every decision that two workers could disagree about runs inside one script,
so Redis applies it atomically: which ids a worker may fetch (``CLAIM``), an
id's outcome, the lane's first undecided id, the run of misses and the cut
(``RECORD``), and taking over the work of a worker that stopped answering
(inside ``CLAIM``, ``POLL`` and ``LEAVE``). The rules are those of
:class:`idcrawl.core.lanes.Lane`: the margin is applied in lane order, a found
id is emitted only once the decided prefix passes it (so no cut can come
before it), an id decided past the cut is overshoot.

Keys (``P`` is the job prefix, ``idcrawl:{JOB}:`` by default, a Redis Cluster
hash tag keeping them in one slot):

``P specs``            hash  target name -> its spec (JSON): the job's targets
``P tver``             int   bumped when a target is added (workers reload)
``P tl:<target>``      list  the target's lane keys, in order
``P L:<lane>``         hash  start, step, stop ('' = none), margin, window,
                             neutral (1: failed ids are neutral), weight,
                             next (next id to hand out), fu (first undecided),
                             run (misses in a row), last (last found), cut,
                             reason, target, and job totals c_<count>
``P L:<lane>:bits``    string  the outcome of every id the prefix passed, 2 bits
                             per id at position (id - start) * step (BITFIELD
                             u2: 0 found, 1 missing, 2 failed, 3 disallowed)
``P L:<lane>:dec``     hash  id -> outcome code, decided ahead of the prefix
                             (at most ``window`` ids) or past the cut
``P L:<lane>:pay``     hash  id -> serialised outputs of a found id ahead of
                             the prefix (held until the prefix passes it)
``P L:<lane>:own``     hash  id -> worker that claimed it (undecided ids)
``P L:<lane>:free``    list  ids taken back from a worker that stopped; handed
                             out again before new ids
``P unsettled``        set   lanes not settled yet
``P workers``          zset  worker -> last heartbeat (ms, Redis clock)
``P W:<worker>:emit``  hash  "lane|id" -> outputs released to that worker and
                             not yet acknowledged as written
``P orphans``          hash  the same, taken from workers that stopped
``P delayed``          zset  retries (serialised requests) by due time (ms)
``P feed``             list  targets pushed to the fleet (JSON)
``P incidents``        list  incident log entries from every worker
``P polite:<slot>``    int   the earliest time (ms) the next request to a slot may start

Ids are Lua numbers (doubles): exact up to 2**53, far above any real id.
"""

from __future__ import annotations

__all__ = [
    "ADOPT", "CLAIM", "DELAY", "GIVE_BACK", "LEAVE", "POLITE", "POP_DELAYED", "RECORD", "REGISTER", "STATUS",
]

#: Shared helpers, prepended to every script.
_COMMON = r"""
local P = ARGV[1]
local function s(x) return string.format('%d', x) end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- the inclusive last id of a lane: its stop, or 0 for an unbounded desc lane
local function last_id(step, stop)
  if stop == '' or stop == false then
    if step < 0 then return 0 end
    return nil
  end
  return tonumber(stop)
end
local function past(id, step, stop)
  local last = last_id(step, stop)
  if last == nil then return false end
  if step > 0 then return id > last end
  return id < last
end
-- an id of a lane nobody has decided yet (so it must be fetched again)
local function undecided(L, id, step, fu, nxt, cut)
  if cut ~= '' then return false end
  if (id - fu) * step < 0 or (id - nxt) * step >= 0 then return false end
  return redis.call('HEXISTS', L .. ':dec', s(id)) == 0
end
-- take ids (strings) from worker w: undecided ones go to the lane's free list; returns how many
local function give_back(L, w, ids)
  local f = redis.call('HMGET', L, 'step', 'fu', 'next', 'cut')
  if not f[1] then return 0 end
  local step, fu, nxt, cut = tonumber(f[1]), tonumber(f[2]), tonumber(f[3]), f[4]
  local n = 0
  for _, sid in ipairs(ids) do
    if redis.call('HGET', L .. ':own', sid) == w then
      redis.call('HDEL', L .. ':own', sid)
      if undecided(L, tonumber(sid), step, fu, nxt, cut) then
        redis.call('RPUSH', L .. ':free', sid)
        n = n + 1
      end
    end
  end
  return n
end
-- give back what a worker held: its undecided ids to the free lists, its
-- unacknowledged outputs to the orphans
local function release_worker(w)
  local taken = 0
  for _, lane in ipairs(redis.call('SMEMBERS', P .. 'unsettled')) do
    local L = P .. 'L:' .. lane
    local own = redis.call('HGETALL', L .. ':own')
    local held = {}
    for i = 1, #own, 2 do
      if own[i + 1] == w then held[#held + 1] = own[i] end
    end
    if #held > 0 then taken = taken + give_back(L, w, held) end
  end
  local E = P .. 'W:' .. w .. ':emit'
  local emit = redis.call('HGETALL', E)
  for i = 1, #emit, 2 do
    redis.call('HSET', P .. 'orphans', emit[i], emit[i + 1])
  end
  redis.call('DEL', E)
  redis.call('ZREM', P .. 'workers', w)
  return taken
end
-- workers whose heartbeat is older than the lease timeout have stopped
local function reclaim(now, lease, me)
  local dead = redis.call('ZRANGEBYSCORE', P .. 'workers', '-inf', now - lease, 'LIMIT', 0, 8)
  local taken = 0
  for _, w in ipairs(dead) do
    if w ~= me then
      taken = taken + release_worker(w)
      redis.call('HINCRBY', P .. 'job', 'reclaimed_workers', 1)
    end
  end
  if taken > 0 then redis.call('HINCRBY', P .. 'job', 'reclaimed_ids', taken) end
  return taken
end
"""

#: ARGV: P, name, spec, then per lane: key, start, step, stop, margin, window, neutral, weight.
#: Creates the target's lanes unless the target exists; returns the stored spec (nil if created).
REGISTER = _COMMON + r"""
local name, spec = ARGV[2], ARGV[3]
local current = redis.call('HGET', P .. 'specs', name)
if current then return current end
redis.call('HSET', P .. 'specs', name, spec)
local i = 4
while i <= #ARGV do
  local key, start, step, stop = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), ARGV[i + 3]
  local L = P .. 'L:' .. key
  local reason = ''
  if start < 0 or past(start, step, stop) then reason = 'bound' end
  redis.call('HSET', L, 'start', s(start), 'step', s(step), 'stop', stop, 'margin', ARGV[i + 4],
    'window', ARGV[i + 5], 'neutral', ARGV[i + 6], 'weight', ARGV[i + 7], 'next', s(start), 'fu', s(start),
    'run', '0', 'last', '', 'cut', '', 'reason', reason, 'target', name)
  redis.call('RPUSH', P .. 'tl:' .. name, key)
  if reason == '' then redis.call('SADD', P .. 'unsettled', key) end
  i = i + 8
end
redis.call('INCR', P .. 'tver')
return false
"""

#: ARGV: P, worker, lane, n, lease_ms. Heartbeat, reclaim stopped workers, then hand
#: out up to n ids of the lane: taken-back ids first, then new ones within the window.
#: Returns {fu, next, reason, cut, last, id...}, or {} for an unknown lane.
CLAIM = _COMMON + r"""
local me, lane, n, lease = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_ms()
redis.call('ZADD', P .. 'workers', now, me)
reclaim(now, lease, me)
local L = P .. 'L:' .. lane
local f = redis.call('HMGET', L, 'start', 'step', 'stop', 'window', 'next', 'fu', 'reason', 'cut', 'last')
if not f[1] then return {} end
local step, stop, window = tonumber(f[2]), f[3], tonumber(f[4])
local nxt, fu, reason, cut = tonumber(f[5]), tonumber(f[6]), f[7], f[8]
local ids = {}
if cut == '' then
  while #ids < n do
    local id = redis.call('LPOP', L .. ':free')
    if not id then break end
    id = tonumber(id)
    if undecided(L, id, step, fu, nxt, cut) then ids[#ids + 1] = id end
  end
  if reason == '' and #ids < n then
    local room = window - (nxt - fu) * step
    while #ids < n and room > 0 do
      ids[#ids + 1] = nxt
      nxt = nxt + step
      room = room - 1
      if past(nxt, step, stop) then
        reason = 'bound'
        break
      end
    end
    redis.call('HSET', L, 'next', s(nxt), 'reason', reason)
  end
end
for _, id in ipairs(ids) do redis.call('HSET', L .. ':own', s(id), me) end
if #ids > 0 then redis.call('HINCRBY', L, 'c_dispensed', #ids) end
local out = {s(fu), s(nxt), reason, cut, f[9]}
for _, id in ipairs(ids) do out[#out + 1] = s(id) end
return out
"""

#: ARGV: P, worker, lane, id, code, payload ('' = none). Records an id's outcome, advances
#: the lane's prefix, cuts it at the margin, and releases the outputs of found ids the
#: prefix passed to this worker (kept under W:<worker>:emit until acknowledged).
#: Returns {fu, next, reason, cut, last, found, missing, failed, disallowed, emitted,
#: overshoot, past_cut, duplicate, settled, lane|id, payload, ...}; {} for an unknown lane.
RECORD = _COMMON + r"""
local me, lane, id, code, payload = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local L = P .. 'L:' .. lane
local f = redis.call('HMGET', L, 'start', 'step', 'margin', 'neutral', 'next', 'fu', 'run', 'last', 'cut', 'reason')
if not f[1] then return {} end
local start, step, margin, neutral = tonumber(f[1]), tonumber(f[2]), tonumber(f[3]), f[4] == '1'
local nxt, fu, run, last, cut, reason = tonumber(f[5]), tonumber(f[6]), tonumber(f[7]), f[8], f[9], f[10]
local c = {0, 0, 0, 0}  -- found, missing, failed, disallowed (by code + 1)
local emitted, overshoot, past_cut, duplicate = 0, 0, 0, 0
local released = {}
local sid = s(id)
redis.call('HDEL', L .. ':own', sid)
local function reply()
  local settled = 0
  if reason ~= '' and (cut ~= '' or fu == nxt) then settled = 1 end
  local out = {s(fu), s(nxt), reason, cut, last, c[1], c[2], c[3], c[4], emitted, overshoot, past_cut,
    duplicate, settled}
  for _, v in ipairs(released) do out[#out + 1] = v end
  return out
end
if (id - fu) * step < 0 or (id - nxt) * step >= 0 or redis.call('HEXISTS', L .. ':dec', sid) == 1 then
  duplicate = 1
  return reply()
end
redis.call('HSET', L .. ':dec', sid, s(code))
if cut ~= '' then  -- past the cut: counted, never emitted
  past_cut = 1
  if code == 0 then overshoot = 1 end
  redis.call('HINCRBY', L, 'c_past_cut', 1)
  redis.call('HINCRBY', L, 'c_overshoot', overshoot)
  return reply()
end
if code == 0 and payload ~= '' then redis.call('HSET', L .. ':pay', sid, payload) end
local cut_now = false
while true do
  local key = s(fu)
  local o = redis.call('HGET', L .. ':dec', key)
  if not o then break end
  o = tonumber(o)
  redis.call('HDEL', L .. ':dec', key)
  redis.call('BITFIELD', L .. ':bits', 'SET', 'u2', '#' .. s((fu - start) * step), s(o))
  local at = fu
  fu = fu + step
  c[o + 1] = c[o + 1] + 1
  if o == 0 then
    run = 0
    last = key
    local p = redis.call('HGET', L .. ':pay', key)
    if p then
      redis.call('HDEL', L .. ':pay', key)
      local field = lane .. '|' .. key
      redis.call('HSET', P .. 'W:' .. me .. ':emit', field, p)
      released[#released + 1] = field
      released[#released + 1] = p
      emitted = emitted + 1
    end
  elseif not (neutral and o == 2) then
    run = run + 1
    if margin > 0 and run >= margin then
      cut = s(at)
      reason = 'margin'
      cut_now = true
      break
    end
  end
end
if cut_now then
  local ahead = redis.call('HGETALL', L .. ':dec')
  for i = 1, #ahead, 2 do
    past_cut = past_cut + 1
    if ahead[i + 1] == '0' then overshoot = overshoot + 1 end
  end
  redis.call('DEL', L .. ':pay', L .. ':free')
end
redis.call('HSET', L, 'fu', s(fu), 'run', s(run), 'last', last, 'cut', cut, 'reason', reason)
local names = {'c_found', 'c_missing', 'c_failed', 'c_disallowed'}
for i = 1, 4 do
  if c[i] > 0 then redis.call('HINCRBY', L, names[i], c[i]) end
end
if emitted > 0 then redis.call('HINCRBY', L, 'c_emitted', emitted) end
if past_cut > 0 then redis.call('HINCRBY', L, 'c_past_cut', past_cut) end
if overshoot > 0 then redis.call('HINCRBY', L, 'c_overshoot', overshoot) end
if reason ~= '' and (cut ~= '' or fu == nxt) then
  redis.call('SREM', P .. 'unsettled', lane)
  redis.call('DEL', L .. ':own', L .. ':free')
end
return reply()
"""

#: ARGV: P, worker, lease_ms, lane... Heartbeat + reclaim, then per lane
#: {fu, next, reason, cut, last, free ids} and the job's
#: {unsettled, delayed, orphans, feed, tver, next due in ms or -1}.
STATUS = _COMMON + r"""
local me, lease = ARGV[2], tonumber(ARGV[3])
local now = now_ms()
redis.call('ZADD', P .. 'workers', now, me)
reclaim(now, lease, me)
local out = {}
for i = 4, #ARGV do
  local L = P .. 'L:' .. ARGV[i]
  local f = redis.call('HMGET', L, 'fu', 'next', 'reason', 'cut', 'last')
  out[#out + 1] = {f[1] or '', f[2] or '', f[3] or '', f[4] or '', f[5] or '', redis.call('LLEN', L .. ':free')}
end
local due = redis.call('ZRANGE', P .. 'delayed', 0, 0, 'WITHSCORES')
local next_due = -1
if #due > 0 then next_due = math.max(0, tonumber(due[2]) - now) end
out[#out + 1] = {redis.call('SCARD', P .. 'unsettled'), redis.call('ZCARD', P .. 'delayed'),
  redis.call('HLEN', P .. 'orphans'), redis.call('LLEN', P .. 'feed'),
  tonumber(redis.call('GET', P .. 'tver') or '0'), next_due}
return out
"""

#: ARGV: P, worker, n. Take up to n orphaned outputs into this worker's emit hash.
ADOPT = _COMMON + r"""
local me, n = ARGV[2], tonumber(ARGV[3])
local fields = redis.call('HKEYS', P .. 'orphans')
local out = {}
for i = 1, math.min(n, #fields) do
  local v = redis.call('HGET', P .. 'orphans', fields[i])
  redis.call('HDEL', P .. 'orphans', fields[i])
  redis.call('HSET', P .. 'W:' .. me .. ':emit', fields[i], v)
  out[#out + 1] = fields[i]
  out[#out + 1] = v
end
return out
"""

#: ARGV: P, worker. A worker leaving cleanly: its claims go back to the free lists and
#: its unacknowledged outputs to the orphans at once (no lease timeout to wait for).
LEAVE = _COMMON + r"""
return release_worker(ARGV[2])
"""

#: ARGV: P, worker, lane, id... Ids Redis handed to this worker in a reply that never
#: arrived (a CLAIM or POP_DELAYED cut by an outage): the worker does not know them, so
#: they go back to the lane's free list (still undecided) for any worker to claim.
#: Returns how many went back.
GIVE_BACK = _COMMON + r"""
local ids = {}
for i = 4, #ARGV do ids[#ids + 1] = ARGV[i] end
return give_back(P .. 'L:' .. ARGV[3], ARGV[2], ids)
"""

#: ARGV: P, lane, id, delay_ms, member. A retry waits in the shared delayed set; the id
#: is owned by the set meanwhile (a worker that stops does not take it back twice).
DELAY = _COMMON + r"""
local now = now_ms()
redis.call('ZADD', P .. 'delayed', now + tonumber(ARGV[4]), ARGV[5])
local L = P .. 'L:' .. ARGV[2]
if redis.call('EXISTS', L) == 1 then redis.call('HSET', L .. ':own', ARGV[3], '~delayed') end
return 1
"""

#: ARGV: P, worker, n. Take up to n due retries; each member is "lane\tid\n" + request.
POP_DELAYED = _COMMON + r"""
local me, n = ARGV[2], tonumber(ARGV[3])
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', P .. 'delayed', '-inf', now, 'LIMIT', 0, n)
for _, member in ipairs(due) do
  redis.call('ZREM', P .. 'delayed', member)
  local lane, id = string.match(member, '^([^\t]*)\t([^\n]*)\n')
  if lane then
    local L = P .. 'L:' .. lane
    if redis.call('HGET', L .. ':own', id) == '~delayed' then redis.call('HSET', L .. ':own', id, me) end
  end
end
return due
"""

#: ARGV: P, slot, gap_ms. Reserve the next start time of a request to the slot for the
#: whole fleet: 0 = go now (the slot's next start is now + gap), else ms to wait.
POLITE = _COMMON + r"""
local key, gap = P .. 'polite:' .. ARGV[2], tonumber(ARGV[3])
local now = now_ms()
local allowed = tonumber(redis.call('GET', key) or '0')
if now < allowed then return allowed - now end
redis.call('SET', key, s(now + gap), 'PX', math.max(1000, gap * 10))
return 0
"""
