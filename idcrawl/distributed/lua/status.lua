-- STATUS: heartbeat, take back the ids of stopped workers, then report the lanes changed since the
-- worker last asked (the change log P lchg, common.lua's changed: never every lane), a few lanes the
-- worker checks in turn, and the job; check that the job's keys are there, and keep the job's last
-- activity (the no-progress rule). Its cost is that of the changes, not of the job's size.
-- KEYS: P workers, P unsettled, P orphans, P job, P delayed, P feed, P tver, P specs, P run,
--   P progress, P lchg, then per lane checked P L:<lane> and its :free.
-- ARGV: worker, lease_ms, cap (IDCRAWL_MAX_HELD_PAYLOADS, 0: none), busy ('1': this worker has ids or
--   requests in flight), since (the change serial the worker has seen; -1: none, only the serial), limit
--   (changed lanes at most).
-- Returns per lane checked {fu, next, reason, cut, last, free ids, room (1: CLAIM would hand out new ids;
-- room_of and capped in common.lua)}, then the job's
-- {unsettled, delayed, orphans, feed, tver, next due in ms or -1, quiet ms, lost key or ''}, then
-- {serial, lane, row, ...}: the lanes changed after since (a row as above, {} for a lane gone; a
-- member '@<space base>': a space whose held payloads shrank), serial: what the worker has now seen.
-- quiet: ms since the job last recorded an outcome (P progress outcomes, RECORD), a busy worker
-- polled or a retry waited for its time. lost: the first key found missing that a running job has
-- (P run; P specs and P tver once the worker walks lanes; per lane checked P unsettled's member, :bits once the
-- prefix moved, :ids of a list lane, P tl:<target>, and the claim, free id or retry holding its first undecided id).
local J = job_keys()
local delayed, feed, tver, specs, run, progress = KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local lchg = KEYS[11]
local me, lease, cap, busy = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3] or '0'), ARGV[4] == '1'
local since, limit = ARGV[5] or '0', tonumber(ARGV[6] or '1000')
local now = now_ms()
redis.call('ZADD', J.workers, now, me)
reclaim(J, now, lease, me)
local lost = ''
local needed = {run}
if #KEYS > 11 then needed = {specs, tver, run} end  -- a worker that waits for pushed targets has no lanes yet
for _, key in ipairs(needed) do
  if lost == '' and redis.call('EXISTS', key) == 0 then lost = key end
end

-- is the first undecided id of lane K (fu, a string) held: claimed, taken back, a retry, or another
-- lane's fetch it waits for? Every id between fu and next is (else the prefix would wait for ever)
local function held(K, fu)
  if redis.call('HEXISTS', K.own, fu) == 1 or redis.call('HEXISTS', K.dec, fu) == 1 then return true end
  if redis.call('LLEN', K.free) > 0 then
    for _, v in ipairs(redis.call('LRANGE', K.free, 0, -1)) do
      if v == fu then return true end
    end
  end
  local S = space_of(K)
  return S ~= nil and (redis.call('HEXISTS', S.fly, fu) == 1 or redis.call('HEXISTS', S.wait, fu) == 1)
end

-- a lane's row {fu, next, reason, cut, last, free ids, room} and its fields (nil: the lane is gone)
local function row_of(L)
  local f = redis.call('HMGET', L, 'fu', 'next', 'reason', 'cut', 'last', 'step', 'window', 'margin', 'start',
    'target', 'ids')
  local room = 0
  if f[1] and f[3] == '' and f[4] == '' then
    local step = tonumber(f[6])
    if room_of({hash = L}, step, tonumber(f[7]), tonumber(f[1]), tonumber(f[2]), tonumber(f[8])) > 0 then
      room = 1
    end
    if room == 1 and cap > 0 then
      local S = space_of({hash = L})
      if capped(S, S and S.lane, cap) then room = 0 end
    end
  end
  return {f[1] or '', f[2] or '', f[3] or '', f[4] or '', f[5] or '', redis.call('LLEN', L .. ':free'), room}, f
end

local out = {}
for i = 12, #KEYS, 2 do
  local row, f = row_of(KEYS[i])
  if f[1] and lost == '' then
    local K = lane_keys(KEYS[i])
    local lane = string.sub(KEYS[i], #J.P + 3)
    local settled = f[3] ~= '' and (f[4] ~= '' or f[1] == f[2])
    if not settled and redis.call('SISMEMBER', J.unsettled, lane) == 0 then lost = J.unsettled
    elseif f[1] ~= f[9] and redis.call('EXISTS', K.bits) == 0 then lost = K.bits
    elseif f[11] and redis.call('EXISTS', KEYS[i] .. ':ids') == 0 then lost = KEYS[i] .. ':ids'
    elseif f[10] and redis.call('EXISTS', J.P .. 'tl:' .. f[10]) == 0 then lost = J.P .. 'tl:' .. f[10]
    elseif f[4] == '' and f[1] ~= f[2] and not held(K, f[1]) then
      -- the outcomes decided ahead of the prefix, most likely (a lost claim is recorded by its worker all the same)
      lost = KEYS[i] .. ':dec (or :own, :free: the first undecided id ' .. f[1] .. ' is held by nothing)'
    end
  end
  out[#out + 1] = row
end
-- the lanes changed since the worker last asked
local log = {}  -- since -1: no lane read yet, only the serial
if since ~= '-1' then log = redis.call('ZRANGEBYSCORE', lchg, '(' .. since, '+inf', 'WITHSCORES', 'LIMIT', 0, limit) end
local serial = redis.call('HGET', progress, 'chg') or '0'
if #log >= 2 * limit then serial = log[#log] end  -- more to come: the next poll goes on from there
local changes = {serial}
for i = 1, #log, 2 do
  local member = log[i]
  changes[#changes + 1] = member
  if string.sub(member, 1, 1) == '@' then
    changes[#changes + 1] = {}
  else
    local row, f = row_of(J.P .. 'L:' .. member)
    if f[1] then changes[#changes + 1] = row else changes[#changes + 1] = {} end
  end
end
local due = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
local next_due = -1
if #due > 0 then next_due = math.max(0, tonumber(due[2]) - now) end
local p = redis.call('HMGET', progress, 'outcomes', 'seen', 'active_at')
local outcomes, active = p[1] or '0', tonumber(p[3] or '')
if busy or next_due > 0 or p[2] ~= outcomes or active == nil then
  redis.call('HSET', progress, 'seen', outcomes, 'active_at', s(now))
  active = now
end
out[#out + 1] = {redis.call('SCARD', J.unsettled), redis.call('ZCARD', delayed), redis.call('HLEN', J.orphans),
  redis.call('LLEN', feed), tonumber(redis.call('GET', tver) or '0'), next_due, now - active, lost}
out[#out + 1] = changes
return out
