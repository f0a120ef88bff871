-- STATUS: heartbeat, take back the ids of stopped workers, then report lanes and job.
-- KEYS: P workers, P unsettled, P orphans, P job, P delayed, P feed, P tver, then per lane
--   P L:<lane> and its :free.
-- ARGV: worker, lease_ms[, cap: IDCRAWL_MAX_HELD_PAYLOADS (0 or absent: none)].
-- Returns per lane {fu, next, reason, cut, last, free ids, room (1: CLAIM would hand out new ids;
-- room_of and capped in common.lua)} and then the job's
-- {unsettled, delayed, orphans, feed, tver, next due in ms or -1}.
local J = job_keys()
local delayed, feed, tver = KEYS[5], KEYS[6], KEYS[7]
local me, lease, cap = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3] or '0')
local now = now_ms()
redis.call('ZADD', J.workers, now, me)
reclaim(J, now, lease, me)
local out = {}
for i = 8, #KEYS, 2 do
  local f = redis.call('HMGET', KEYS[i], 'fu', 'next', 'reason', 'cut', 'last', 'step', 'window', 'margin')
  local room = 0
  if f[1] and f[3] == '' and f[4] == '' then
    local step = tonumber(f[6])
    if room_of({hash = KEYS[i]}, step, tonumber(f[7]), tonumber(f[1]), tonumber(f[2]), tonumber(f[8])) > 0 then
      room = 1
    end
    if room == 1 and cap > 0 then
      local S = space_of({hash = KEYS[i]})
      if capped(S, S and S.lane, cap) then room = 0 end
    end
  end
  out[#out + 1] = {f[1] or '', f[2] or '', f[3] or '', f[4] or '', f[5] or '', redis.call('LLEN', KEYS[i + 1]), room}
end
local due = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
local next_due = -1
if #due > 0 then next_due = math.max(0, tonumber(due[2]) - now) end
out[#out + 1] = {redis.call('SCARD', J.unsettled), redis.call('ZCARD', delayed), redis.call('HLEN', J.orphans),
  redis.call('LLEN', feed), tonumber(redis.call('GET', tver) or '0'), next_due}
return out
