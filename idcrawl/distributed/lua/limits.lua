-- LIMITS: add one worker's new counts to a domain's (or the job's) fleet counts and read the fleet's
-- totals and times back, for the rules of idcrawl.distributed.limits.
-- KEYS: P limits:<level>:<key>.
-- ARGV: the worker's new iterations, page_loads, targets, found_count (since its last call);
--       first_age_ms: how long ago (ms) its first iteration started, -1 = none yet;
--       last_age_ms: how long ago its last iteration started, -1 = none yet;
--       stop: a rule it fired that the fleet has not heard of ('' = none);
--       changed: the fleet's iteration count (as the worker counts it) when it last found a target;
--       now_ms: '' = Redis's clock (always, in a crawl), else the fleet's time in ms (tests drive it).
-- The hash keeps the four counts, 'stopped' (the first rule that fired, HSETNX), 'first' and 'last'
-- (the fleet's first and last iteration starts, ms on Redis's clock: the earliest and the latest any
-- worker reported) and 'changed' (the fleet's iteration count when its found count last grew: the
-- largest any worker reported).
-- Returns {iterations, page_loads, targets, found_count, stopped ('' = none), changed,
--          ms since the fleet's first iteration (-1 = none), ms since its last (-1 = none)}.
local key = KEYS[1]
local now = now_ms()
if ARGV[9] ~= '' then now = tonumber(ARGV[9]) end
if ARGV[7] ~= '' then redis.call('HSETNX', key, 'stopped', ARGV[7]) end
local totals = {}
local names = {'iterations', 'page_loads', 'targets', 'found_count'}
for i, name in ipairs(names) do
  totals[i] = redis.call('HINCRBY', key, name, ARGV[i])
end
local changed = tonumber(ARGV[8])
if changed > tonumber(redis.call('HGET', key, 'changed') or '0') then redis.call('HSET', key, 'changed', s(changed)) end
local first_age, last_age = tonumber(ARGV[5]), tonumber(ARGV[6])
if first_age >= 0 then
  local at = now - first_age
  local known = tonumber(redis.call('HGET', key, 'first'))
  if known == nil or at < known then redis.call('HSET', key, 'first', s(at)) end
end
if last_age >= 0 then
  local at = now - last_age
  local known = tonumber(redis.call('HGET', key, 'last'))
  if known == nil or at > known then redis.call('HSET', key, 'last', s(at)) end
end
local got = redis.call('HMGET', key, 'stopped', 'changed', 'first', 'last')
local since_first, since_last = -1, -1
if got[3] then since_first = math.max(0, now - tonumber(got[3])) end
if got[4] then since_last = math.max(0, now - tonumber(got[4])) end
totals[5] = got[1] or ''
totals[6] = tonumber(got[2] or '0')
totals[7] = since_first
totals[8] = since_last
return totals
