-- common.lua: helpers that idcrawl.distributed.scripts puts in front of every script.
--
-- Keys: a script touches the keys its caller passes in KEYS, and derives the keys it
-- discovers while running (another lane's keys, a stopped worker's emit hash) from the job
-- prefix P, itself cut from a key in KEYS (job_keys, prefix_of): they share its hash tag.

local function s(x) return string.format('%d', x) end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The lane change log, read by STATUS instead of every lane: P lchg, a sorted set of lanes by the
-- serial of their last change (P progress field 'chg', one up per change). A change is what may
-- settle a lane or give it room or free ids: an outcome (record_lane), ids going back to a free list
-- (give_back, pass_on), a lane created or reopened (REGISTER, RESUME), a held id waiting for a lane;
-- '@' .. <space base> when a space's held payloads shrink (its lanes' cap may have lifted). A worker
-- that mirrored the lanes at serial n sees every lane changed since in the members scored above n.
local function changed(P, member)
  local n = redis.call('HINCRBY', P .. 'progress', 'chg', 1)
  redis.call('ZADD', P .. 'lchg', n, member)
end

-- the job prefix P of a key passed as P .. suffix
local function prefix_of(key, suffix)
  assert(string.sub(key, -#suffix) == suffix, 'idcrawl: key ' .. key .. ' does not end with ' .. suffix)
  return string.sub(key, 1, #key - #suffix)
end

-- the keys of a script that takes back the work of stopped workers: KEYS[1..4] are
-- P workers, P unsettled, P orphans, P job (hash of job totals)
local function job_keys()
  return {P = prefix_of(KEYS[1], 'workers'), workers = KEYS[1], unsettled = KEYS[2], orphans = KEYS[3],
    job = KEYS[4]}
end

-- the keys of a lane from its hash key L (P L:<lane>)
local function lane_keys(L)
  return {hash = L, own = L .. ':own', free = L .. ':free', dec = L .. ':dec', pay = L .. ':pay', bits = L .. ':bits'}
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

-- an id of lane K nobody has decided yet (so it must be fetched again)
local function undecided(K, id, step, fu, nxt, cut)
  if cut ~= '' then return false end
  if (id - fu) * step < 0 or (id - nxt) * step >= 0 then return false end
  return redis.call('HEXISTS', K.dec, s(id)) == 0
end

-- The shared id space of overlapping targets (targets with one URL template and outcome
-- rules, idcrawl.core.overlap): REGISTER marks the lanes of a space once two targets are in
-- it (fields space = its base key P S:<space>, lane = the lane's key). Keys of a space:
--   <base>:targets set of its targets, <base>:lanes set of its lanes,
--   <base>:fly  hash id -> the lane fetching it (claimed, no outcome yet),
--   <base>:wait hash id -> lanes waiting for that outcome ("\n"-separated),
--   <base>:pay  hash id -> outputs of a found id that no lane has emitted yet.
-- An id's known outcome is read from the lanes themselves (their 2-bit field and :dec).
local function space_of(K)
  local f = redis.call('HMGET', K.hash, 'space', 'lane')
  if not f[1] then return nil end
  local b = f[1]
  return {base = b, lane = f[2], P = prefix_of(K.hash, 'L:' .. f[2]), lanes = b .. ':lanes', fly = b .. ':fly',
    wait = b .. ':wait', pay = b .. ':pay'}
end

-- the outcome code of id in another lane of space S, or nil if no lane decided it
local function space_outcome(S, me, id)
  for _, l in ipairs(redis.call('SMEMBERS', S.lanes)) do
    if l ~= me then
      local L = S.P .. 'L:' .. l
      local f = redis.call('HMGET', L, 'start', 'step', 'fu')
      if f[1] then
        local start, step, fu = tonumber(f[1]), tonumber(f[2]), tonumber(f[3])
        if (id - start) * step >= 0 and (id - fu) * step < 0 then
          return redis.call('BITFIELD', L .. ':bits', 'GET', 'u2', '#' .. s((id - start) * step))[1]
        end
        local o = redis.call('HGET', L .. ':dec', s(id))
        if o then return tonumber(o) end
      end
    end
  end
  return nil
end

-- lane will not fetch id (string) after all (cut, or its worker's claim dropped past the cut):
-- the first waiting lane not cut fetches it instead (it goes to that lane's free list)
local function pass_on(S, lane, sid)
  if redis.call('HGET', S.fly, sid) ~= lane then return end
  local w = redis.call('HGET', S.wait, sid)
  local heir, rest = nil, {}
  if w then
    for other in string.gmatch(w, '[^\n]+') do
      if heir == nil and redis.call('HGET', S.P .. 'L:' .. other, 'cut') == '' then
        heir = other
      elseif heir ~= nil then
        rest[#rest + 1] = other
      end
    end
  end
  if heir == nil then
    redis.call('HDEL', S.fly, sid)
    redis.call('HDEL', S.wait, sid)
    return
  end
  redis.call('HSET', S.fly, sid, heir)
  redis.call('RPUSH', S.P .. 'L:' .. heir .. ':free', sid)
  changed(S.P, heir)
  if #rest > 0 then redis.call('HSET', S.wait, sid, table.concat(rest, '\n'))
  else redis.call('HDEL', S.wait, sid) end
end

-- A settled lane forgets its claims, except those of ids in flight for its space (other lanes
-- may wait for their outcomes): it is listed in the set P held, so that a stopped worker's
-- release still finds them (release_worker) and hands them on (give_back, pass_on).
local function keep_flying(K, lane, S)
  if not S then
    redis.call('DEL', K.own)
    return
  end
  local own = redis.call('HGETALL', K.own)
  local kept = 0
  for i = 1, #own, 2 do
    if redis.call('HGET', S.fly, own[i]) == lane then kept = kept + 1
    else redis.call('HDEL', K.own, own[i]) end
  end
  if kept > 0 then redis.call('SADD', S.P .. 'held', lane) end
end

-- a settled lane whose kept claims are all done leaves the set P held
local function forget_held(K, lane, S)
  if redis.call('HLEN', K.own) == 0 then redis.call('SREM', S.P .. 'held', lane) end
end

-- take ids (strings) of lane K from worker w: undecided ones go to the lane's free list;
-- returns how many
local function give_back(K, w, ids, P, lane)
  local f = redis.call('HMGET', K.hash, 'step', 'fu', 'next', 'cut')
  if not f[1] then return 0 end
  local step, fu, nxt, cut = tonumber(f[1]), tonumber(f[2]), tonumber(f[3]), f[4]
  local S = space_of(K)
  local n = 0
  for _, sid in ipairs(ids) do
    if redis.call('HGET', K.own, sid) == w then
      redis.call('HDEL', K.own, sid)
      if undecided(K, tonumber(sid), step, fu, nxt, cut) then
        redis.call('RPUSH', K.free, sid)
        n = n + 1
      elseif S then
        pass_on(S, S.lane, sid)
      end
    elseif S and cut ~= '' then  -- a cut lane settles and forgets its claims: w gives back one it will not fetch
      pass_on(S, S.lane, sid)
    end
  end
  if S and cut ~= '' then forget_held(K, S.lane, S) end
  if n > 0 then changed(P, lane) end
  return n
end

-- give back what worker w held: its undecided ids to the free lists, its unacknowledged
-- outputs (its emit hash E) to the orphans
local function release_worker(J, w, E)
  local taken = 0
  local lanes = redis.call('SMEMBERS', J.unsettled)
  for _, lane in ipairs(redis.call('SMEMBERS', J.P .. 'held')) do lanes[#lanes + 1] = lane end
  for _, lane in ipairs(lanes) do
    local K = lane_keys(J.P .. 'L:' .. lane)
    local own = redis.call('HGETALL', K.own)
    local held = {}
    for i = 1, #own, 2 do
      if own[i + 1] == w then held[#held + 1] = own[i] end
    end
    if #held > 0 then taken = taken + give_back(K, w, held, J.P, lane) end
  end
  local emit = redis.call('HGETALL', E)
  for i = 1, #emit, 2 do
    redis.call('HSET', J.orphans, emit[i], emit[i + 1])
  end
  redis.call('DEL', E)
  redis.call('ZREM', J.workers, w)
  -- the fleet's run goes on for a grace after a worker left (run.lua)
  if redis.call('EXISTS', J.P .. 'run') == 1 then redis.call('HSET', J.P .. 'run', 'at', s(now_ms())) end
  return taken
end

-- workers whose heartbeat is older than the lease timeout have stopped: release them
local function reclaim(J, now, lease, me)
  local dead = redis.call('ZRANGEBYSCORE', J.workers, '-inf', now - lease, 'LIMIT', 0, 8)
  local taken = 0
  for _, w in ipairs(dead) do
    if w ~= me then
      taken = taken + release_worker(J, w, J.P .. 'W:' .. w .. ':emit')
      redis.call('HINCRBY', J.job, 'reclaimed_workers', 1)
    end
  end
  if taken > 0 then redis.call('HINCRBY', J.job, 'reclaimed_ids', taken) end
  return taken
end

-- Adaptive speculation (IDCRAWL_SPECULATION=adaptive, idcrawl.core.lanes.Lane(adaptive=True)):
-- a lane with a margin keeps its earliest possible cut (field pcut: where the margin would cut it
-- if every id without an outcome were a miss) and its window base (field base: just after the
-- last found id before pcut). CLAIM hands out at most margin ids past pcut, and counts the window
-- from base (or the first undecided id, whichever is later), at most BEHIND_WINDOWS windows past
-- the first undecided id. A lane without them (fixed window, no margin) has pcut ''.
local BEHIND_WINDOWS = 64

-- A lane's reach (field reach, set by RESUME for a tail told of newer ids by a sitemap; '' or absent:
-- none, as Lane(reach=...)): misses at or before it do not count toward the margin.
local function reach_of(v)
  if v == false or v == nil or v == '' then return nil end
  return tonumber(v)
end

-- id is at or before reach (nil: none) in the lane's order: its miss does not count
local function reached(reach, step, id)
  return reach ~= nil and (reach - id) * step >= 0
end

-- the first id from id on whose miss counts toward the margin
local function after_reach(reach, step, id)
  if reached(reach, step, id) then return reach + step end
  return id
end

-- a lane (re)starting at id: its earliest possible cut and window base from scratch
local function reset_earliest_cut(K, id)
  local f = redis.call('HMGET', K.hash, 'adaptive', 'margin', 'step', 'reach')
  local margin, step = tonumber(f[2]) or 0, tonumber(f[3])
  if f[1] == '1' and margin > 0 then
    redis.call('HSET', K.hash, 'pcut', s(after_reach(reach_of(f[4]), step, id) + (margin - 1) * step), 'base', s(id))
  else
    redis.call('HSET', K.hash, 'pcut', '', 'base', s(id))
  end
end

-- id at (not passed by the prefix fu yet; its outcome is in K.dec) became found or neutral: the
-- earliest possible cut may move on, and the window base with it (as Lane._move_earliest_cut).
-- run0: the misses in a row just before fu; nxt: the next id to hand out.
local function move_earliest_cut(K, at, step, margin, neutral, fu, run0, nxt)
  local f = redis.call('HMGET', K.hash, 'pcut', 'base', 'reach')
  if not f[1] or f[1] == '' then return end
  local pcut, base, reach = tonumber(f[1]), tonumber(f[2]), reach_of(f[3])
  if (at - pcut) * step > 0 then return end
  local function miss(o, id) return (o == false or not (neutral and o == '2')) and not reached(reach, step, id) end
  local run, i, hit = 0, at - step, false
  while (i - fu) * step >= 0 do
    local o = redis.call('HGET', K.dec, s(i))
    if o == '0' then hit = true break end
    if miss(o, i) then run = run + 1 end
    i = i - step
  end
  if not hit then run = run + run0 end
  local last_found, done = nil, false
  i = at
  while (i - nxt) * step < 0 do
    local o = redis.call('HGET', K.dec, s(i))
    if o == '0' then
      run = 0
      last_found = i
    elseif miss(o, i) then
      run = run + 1
      if run >= margin then
        pcut = i
        done = true
        break
      end
    end
    i = i + step
  end
  -- ids not handed out count as misses (those after the reach)
  if not done then pcut = after_reach(reach, step, nxt) + (margin - run - 1) * step end
  if last_found ~= nil and (last_found + step - base) * step > 0 then base = last_found + step end
  redis.call('HSET', K.hash, 'pcut', s(pcut), 'base', s(base))
end

-- how many new ids CLAIM may hand out now: the window (counted from the window base of an
-- adaptive lane), and for an adaptive lane at most margin past its earliest possible cut (CLAIM
-- passes 0 instead of the lane's margin for a worker whose slot of the host is sequential)
local function room_of(K, step, window, fu, nxt, margin)
  local f = redis.call('HMGET', K.hash, 'pcut', 'base')
  if not f[1] or f[1] == '' then return window - (nxt - fu) * step end
  local pcut, base = tonumber(f[1]), tonumber(f[2])
  if (base - fu) * step < 0 then base = fu end
  return math.min(window - (nxt - base) * step, margin + 1 - (nxt - pcut) * step,
    window * BEHIND_WINDOWS - (nxt - fu) * step)
end

-- The emitting lane of a shared found id (idcrawl.core.overlap.emitting_rank): of the lanes of
-- its space whose final prefix holds it, the one with the fewest steps from where it started
-- walking (field from: its start, or a resume's restart id) to the id, ties by lane key. The
-- outputs stay in <base>:pay until that lane's prefix passes the id and every lane before it by
-- the rule has decided whether its prefix holds the id; a lane that passes it while one before
-- it has not decided yet lists it in <base>:blk:<that lane> (a sorted set by distance), looked at
-- again whenever that lane changes (recheck).
--
-- IDCRAWL_MAX_HELD_PAYLOADS (the cap on held payloads, as Frontier(max_held=...)): <base>:held is
-- the set of the ids of <base>:pay that wait in a <base>:blk:<lane> (their emitting lane is not
-- known yet), moved wherever an id goes into a :blk set or out of it and wherever its outputs leave
-- <base>:pay; its size is the space's held count, one payload per id (a set, not a counter: adding
-- an id twice or removing it twice leaves the count right). CLAIM hands out no new ids to a lane
-- while the space holds cap or more and no held id waits for that lane (capped).
local function hold(S, sid, blocked)
  if blocked then redis.call('SADD', S.base .. ':held', sid)
  elseif redis.call('SREM', S.base .. ':held', sid) == 1 then changed(S.P, '@' .. S.base) end
end

-- found id sid of space S waits (distance x) for lane blk's decision (a held id for blk: blk has room)
local function block(S, blk, x, sid)
  if redis.call('ZADD', S.base .. ':blk:' .. blk, x, sid) == 1 then changed(S.P, blk) end
end

-- a lane of space S (nil: none) may take no new ids: the space holds cap (> 0) payloads or more,
-- and no held id waits for the lane
local function capped(S, lane, cap)
  if not S or not cap or cap <= 0 then return false end
  return redis.call('SCARD', S.base .. ':held') >= cap and redis.call('ZCARD', S.base .. ':blk:' .. lane) == 0
end

local EMIT_FIELDS = {'start', 'from', 'step', 'stop', 'cut', 'fu', 'next', 'reason', 'margin', 'pcut', 'last'}

local function lane_fields(L)
  local v = redis.call('HMGET', L, unpack(EMIT_FIELDS))
  if not v[1] then return nil end
  local f = {}
  for i, name in ipairs(EMIT_FIELDS) do f[name] = v[i] or '' end
  if f.from == '' then f.from = f.start end
  return f
end

-- whether a lane (its fields f) holds found id in its final prefix: true, false, or nil (not known yet)
local function holds_of(f, id)
  local step = tonumber(f.step)
  if f.cut ~= '' then return (id - tonumber(f.cut)) * step < 0 end
  if (id - tonumber(f.next)) * step >= 0 then  -- not handed out
    if f.reason ~= '' then return false end
    return nil
  end
  if (id - tonumber(f.fu)) * step < 0 or tonumber(f.margin) == 0 then return true end
  if f.pcut ~= '' and (id - tonumber(f.pcut)) * step < 0 then return true end
  return nil
end

-- the emitting lane of found id in S: (lane, nil, its fields), or (nil, the first lane by the rule
-- that has not decided, its distance); me: a lane whose prefix is passing id now (it holds it)
local function emitter(S, id, me)
  local ranked = {}
  for _, l in ipairs(redis.call('SMEMBERS', S.lanes)) do
    local f = lane_fields(S.P .. 'L:' .. l)
    if f then
      local step = tonumber(f.step)
      local d = (id - tonumber(f.from)) * step
      if d >= 0 and not past(id, step, f.stop) then ranked[#ranked + 1] = {d, l, f} end
    end
  end
  table.sort(ranked, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
  for _, e in ipairs(ranked) do
    local h
    if e[2] == me then h = true else h = holds_of(e[3], id) end
    if h == nil then return nil, e[2], e[1] end
    if h then return e[2], nil, e[3] end
  end
  return nil, nil, nil
end

-- lane of S changed: found ids that waited for its decision go on; an id whose emitting lane has
-- passed it is emitted into E now (r.released, and a row for that lane in r.rows)
local function recheck(S, lane, E, r)
  local B = S.base .. ':blk:' .. lane
  local f = nil
  while true do
    local head = redis.call('ZRANGE', B, 0, 0)
    if #head == 0 then return end
    local sid = head[1]
    local id = tonumber(sid)
    if redis.call('HEXISTS', S.pay, sid) == 1 then
      f = f or lane_fields(S.P .. 'L:' .. lane)
      if f and holds_of(f, id) == nil then return end
      redis.call('ZREM', B, sid)
      local w, blk, x = emitter(S, id, nil)
      hold(S, sid, blk)
      if blk then
        block(S, blk, x, sid)
      elseif w and (id - tonumber(x.fu)) * tonumber(x.step) < 0 then
        local p = redis.call('HGET', S.pay, sid)
        redis.call('HDEL', S.pay, sid)
        local field = w .. '|' .. sid
        redis.call('HSET', E, field, p)
        redis.call('HINCRBY', S.P .. 'L:' .. w, 'c_emitted', 1)
        r.released[#r.released + 1] = field
        r.released[#r.released + 1] = p
        local settled = 0
        if x.reason ~= '' and (x.cut ~= '' or x.fu == x.next) then settled = 1 end
        r.rows[#r.rows + 1] = {w, x.fu, x.next, x.reason, x.cut, x.last, 0, 0, 0, 0, 1, 0, 0, 1, settled, sid, '0'}
      end
    else
      redis.call('ZREM', B, sid)
      hold(S, sid, false)
    end
  end
end

-- Record outcome code of id in lane (keys K, name lane): advance its prefix, cut it at the
-- margin, release the outputs of found ids the prefix passed into the emit hash E.
-- payload: the outputs of a found id ('' = none). S: the lane's space or nil.
-- Returns {fu, nxt, reason, cut, last, c = {found, missing, failed, disallowed}, emitted,
-- overshoot, past_cut, duplicate, settled, released = {lane|id, payload, ...}}.
local function record_lane(K, lane, id, code, payload, E, unsettled, S)
  local f = redis.call('HMGET', K.hash, 'start', 'step', 'margin', 'neutral', 'next', 'fu', 'run', 'last', 'cut',
    'reason', 'reach')
  if not f[1] then return nil end
  local start, step, margin, neutral = tonumber(f[1]), tonumber(f[2]), tonumber(f[3]), f[4] == '1'
  local reach = reach_of(f[11])
  local r = {fu = tonumber(f[6]), nxt = tonumber(f[5]), reason = f[10], cut = f[9], last = f[8],
    c = {0, 0, 0, 0}, emitted = 0, overshoot = 0, past_cut = 0, duplicate = 0, settled = 0, released = {},
    rows = {}}
  local run = tonumber(f[7])
  local sid = s(id)
  local function done()
    if r.reason ~= '' and (r.cut ~= '' or r.fu == r.nxt) then r.settled = 1 end
    return r
  end
  redis.call('HDEL', K.own, sid)
  if S and r.cut ~= '' then forget_held(K, lane, S) end
  if (id - r.fu) * step < 0 or (id - r.nxt) * step >= 0 or redis.call('HEXISTS', K.dec, sid) == 1 then
    r.duplicate = 1
    return done()
  end
  redis.call('HSET', K.dec, sid, s(code))
  if r.cut == '' and margin > 0 and (code == 0 or (neutral and code == 2)) then
    move_earliest_cut(K, id, step, margin, neutral, r.fu, run, r.nxt)
  end
  if code == 0 and payload ~= '' then
    -- in a space the outputs are the space's: whichever lane's prefix passes the id first emits them
    if S then redis.call('HSET', S.pay, sid, payload)
    elseif r.cut == '' then redis.call('HSET', K.pay, sid, payload) end
  end
  if r.cut ~= '' then  -- past the cut: counted, never emitted
    r.past_cut = 1
    if code == 0 then r.overshoot = 1 end
    redis.call('HINCRBY', K.hash, 'c_past_cut', 1)
    redis.call('HINCRBY', K.hash, 'c_overshoot', r.overshoot)
    return done()
  end
  local cut_now = false
  while true do
    local key = s(r.fu)
    local o = redis.call('HGET', K.dec, key)
    if not o then break end
    o = tonumber(o)
    redis.call('HDEL', K.dec, key)
    redis.call('BITFIELD', K.bits, 'SET', 'u2', '#' .. s((r.fu - start) * step), s(o))
    local at = r.fu
    r.fu = r.fu + step
    r.c[o + 1] = r.c[o + 1] + 1
    if o == 0 then
      run = 0
      r.last = key
      local p = redis.call('HGET', K.pay, key)
      if p then
        redis.call('HDEL', K.pay, key)
      elseif S and redis.call('HEXISTS', S.pay, key) == 1 then  -- the rule names the lane that emits it
        local w, blk, x = emitter(S, at, lane)
        hold(S, key, blk)
        if w == lane then
          p = redis.call('HGET', S.pay, key)
          redis.call('HDEL', S.pay, key)
        elseif blk then
          block(S, blk, x, key)
        end
      end
      if p then
        local field = lane .. '|' .. key
        redis.call('HSET', E, field, p)
        r.released[#r.released + 1] = field
        r.released[#r.released + 1] = p
        r.emitted = r.emitted + 1
      end
    elseif not (neutral and o == 2) and not reached(reach, step, at) then
      run = run + 1
      if margin > 0 and run >= margin then
        r.cut = s(at)
        r.reason = 'margin'
        cut_now = true
        break
      end
    end
  end
  if cut_now then
    local ahead = redis.call('HGETALL', K.dec)
    for i = 1, #ahead, 2 do
      r.past_cut = r.past_cut + 1
      if ahead[i + 1] == '0' then r.overshoot = r.overshoot + 1 end
    end
    if S then
      for _, free in ipairs(redis.call('LRANGE', K.free, 0, -1)) do pass_on(S, lane, free) end
    end
    redis.call('DEL', K.pay, K.free)
  end
  redis.call('HSET', K.hash, 'fu', s(r.fu), 'run', s(run), 'last', r.last, 'cut', r.cut, 'reason', r.reason)
  changed(prefix_of(unsettled, 'unsettled'), lane)
  if S then recheck(S, lane, E, r) end
  local names = {'c_found', 'c_missing', 'c_failed', 'c_disallowed'}
  for i = 1, 4 do
    if r.c[i] > 0 then redis.call('HINCRBY', K.hash, names[i], r.c[i]) end
  end
  if r.emitted > 0 then redis.call('HINCRBY', K.hash, 'c_emitted', r.emitted) end
  if r.past_cut > 0 then redis.call('HINCRBY', K.hash, 'c_past_cut', r.past_cut) end
  if r.overshoot > 0 then redis.call('HINCRBY', K.hash, 'c_overshoot', r.overshoot) end
  if r.reason ~= '' and (r.cut ~= '' or r.fu == r.nxt) then
    redis.call('SREM', unsettled, lane)
    redis.call('DEL', K.free)
    keep_flying(K, lane, S)
  end
  return done()
end

-- the reply of record_lane r: {fu, next, reason, cut, last, 7 counts, duplicate, settled}
local function lane_reply(r)
  return {s(r.fu), s(r.nxt), r.reason, r.cut, r.last, r.c[1], r.c[2], r.c[3], r.c[4], r.emitted, r.overshoot,
    r.past_cut, r.duplicate, r.settled}
end

-- another lane of space S (waiting, or a claim of a known id) takes outcome code of id:
-- its record is added to touched ({lane, lane_reply..., id, code}), its releases to released
local function share(S, other, id, code, E, unsettled, touched, released)
  local r = record_lane(lane_keys(S.P .. 'L:' .. other), other, id, code, '', E, unsettled, S)
  if not r then return end
  local row = lane_reply(r)
  table.insert(row, 1, other)
  row[#row + 1] = s(id)
  row[#row + 1] = s(code)
  touched[#touched + 1] = row
  for _, v in ipairs(r.rows) do touched[#touched + 1] = v end
  for _, v in ipairs(r.released) do released[#released + 1] = v end
end
