-- CLAIM: heartbeat, take back the ids of stopped workers, then hand out up to n ids of
-- a lane: taken-back ids first, then new ones within the window (room_of: adaptive speculation). In a shared id space
-- (overlapping targets) a new id another lane fetches is not handed out: the lane waits for
-- that outcome; an id another lane decided takes its outcome now (outputs once, common.lua).
-- KEYS: P workers, P unsettled, P orphans, P job, P L:<lane>, its :own, :free, :dec.
-- ARGV: worker, n, lease_ms[, speculation: new ids at most this many past an adaptive lane's earliest
-- possible cut; '' or absent: its margin; 0 from a worker whose slot of the host takes one request at a
-- time[, cap: IDCRAWL_MAX_HELD_PAYLOADS, 0 or absent = none: no new ids while the lane's id space
-- holds cap payloads or more and no held id waits for the lane (capped, common.lua)]].
-- Returns {fu, next, reason, cut, last, {deduplicated, touched, released, capped}, id...}, or {} for an
-- unknown lane. deduplicated: ids served without a request; touched and released as RECORD's;
-- capped: 1 if the cap kept the claim from handing out new ids.
local J = job_keys()
local K = lane_keys(KEYS[5])
local me, n, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
redis.call('ZADD', J.workers, now, me)
reclaim(J, now, lease, me)
local f = redis.call('HMGET', K.hash, 'start', 'step', 'stop', 'window', 'next', 'fu', 'reason', 'cut', 'last',
  'margin')
if not f[1] then return {} end
local step, stop, window = tonumber(f[2]), f[3], tonumber(f[4])
local nxt, fu, reason, cut = tonumber(f[5]), tonumber(f[6]), f[7], f[8]
local S = space_of(K)
local ids, dedup, touched, released, held_cap = {}, 0, {}, {}, 0
local E = J.P .. 'W:' .. me .. ':emit'
if cut == '' then
  while #ids < n do
    local id = redis.call('LPOP', K.free)
    if not id then break end
    id = tonumber(id)
    if undecided(K, id, step, fu, nxt, cut) then ids[#ids + 1] = id end
  end
  if reason == '' and #ids < n then
    local speculation = ARGV[4]
    if speculation == nil or speculation == '' then speculation = f[10] end
    local room = room_of(K, step, window, fu, nxt, tonumber(speculation))
    if room > 0 and capped(S, S and S.lane, tonumber(ARGV[5])) then
      room = 0
      held_cap = 1
      redis.call('HINCRBY', J.job, 'held_cap_waits', 1)
    end
    while #ids < n and room > 0 and cut == '' do
      local id = nxt
      nxt = nxt + step
      room = room - 1
      if past(nxt, step, stop) then reason = 'bound' end
      if S then
        local sid = s(id)
        if redis.call('HEXISTS', S.fly, sid) == 1 then  -- another lane fetches it: wait for its outcome
          local w = redis.call('HGET', S.wait, sid)
          redis.call('HSET', S.wait, sid, w and (w .. '\n' .. S.lane) or S.lane)
          dedup = dedup + 1
        else
          local o = space_outcome(S, S.lane, id)
          if o then  -- decided by another lane: this lane takes the outcome now (it may cut the lane)
            dedup = dedup + 1
            redis.call('HSET', K.hash, 'next', s(nxt), 'reason', reason)
            share(S, S.lane, id, o, E, J.unsettled, touched, released)
            local g = redis.call('HMGET', K.hash, 'fu', 'reason', 'cut')
            fu, reason, cut = tonumber(g[1]), g[2], g[3]
          else
            redis.call('HSET', S.fly, sid, S.lane)
            ids[#ids + 1] = id
          end
        end
      else
        ids[#ids + 1] = id
      end
      if reason ~= '' then break end
    end
    redis.call('HSET', K.hash, 'next', s(nxt), 'reason', reason)
    if S then  -- handing out ids may decide whether this lane's prefix holds a shared found id
      local r = {released = {}, rows = {}}
      recheck(S, S.lane, E, r)
      for _, v in ipairs(r.rows) do touched[#touched + 1] = v end
      for _, v in ipairs(r.released) do released[#released + 1] = v end
    end
  end
end
for _, id in ipairs(ids) do redis.call('HSET', K.own, s(id), me) end
if #ids > 0 then redis.call('HINCRBY', K.hash, 'c_dispensed', #ids) end
if #touched > 0 then f[9] = redis.call('HGET', K.hash, 'last') end
local out = {s(fu), s(nxt), reason, cut, f[9], {dedup, touched, released, held_cap}}
for _, id in ipairs(ids) do out[#out + 1] = s(id) end
return out
