-- CLAIM: heartbeat, take back the ids of stopped workers, then hand out up to n ids of
-- a lane: taken-back ids first, then new ones within the window.
-- KEYS: P workers, P unsettled, P orphans, P job, P L:<lane>, its :own, :free, :dec.
-- ARGV: worker, n, lease_ms.
-- Returns {fu, next, reason, cut, last, id...}, or {} for an unknown lane.
local J = job_keys()
local K = {hash = KEYS[5], own = KEYS[6], free = KEYS[7], dec = KEYS[8]}
local me, n, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
redis.call('ZADD', J.workers, now, me)
reclaim(J, now, lease, me)
local f = redis.call('HMGET', K.hash, 'start', 'step', 'stop', 'window', 'next', 'fu', 'reason', 'cut', 'last')
if not f[1] then return {} end
local step, stop, window = tonumber(f[2]), f[3], tonumber(f[4])
local nxt, fu, reason, cut = tonumber(f[5]), tonumber(f[6]), f[7], f[8]
local ids = {}
if cut == '' then
  while #ids < n do
    local id = redis.call('LPOP', K.free)
    if not id then break end
    id = tonumber(id)
    if undecided(K, id, step, fu, nxt, cut) then ids[#ids + 1] = id end
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
    redis.call('HSET', K.hash, 'next', s(nxt), 'reason', reason)
  end
end
for _, id in ipairs(ids) do redis.call('HSET', K.own, s(id), me) end
if #ids > 0 then redis.call('HINCRBY', K.hash, 'c_dispensed', #ids) end
local out = {s(fu), s(nxt), reason, cut, f[9]}
for _, id in ipairs(ids) do out[#out + 1] = s(id) end
return out
