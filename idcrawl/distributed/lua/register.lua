-- REGISTER: create a target's lanes unless the job has the target already.
-- KEYS: P specs, P tver, P unsettled, P tl:<target>, then P L:<lane> for each lane.
-- ARGV: target name, spec (JSON), space (the id space of the target's URL template and
--   outcome rules, '' = none), adaptive ('1': adaptive speculation, IDCRAWL_SPECULATION; '0': the
--   fixed window), then per lane: lane, start, step, stop ('' = none), margin,
--   window, neutral (1: failed ids are neutral), weight.
-- Once a space has two targets, the lanes of all of them are marked as sharing it
-- (space_of in common.lua).
-- Returns the stored spec if the job has the target (nothing changes), {'lost', P specs} if the job has
-- its lanes but not the target (P specs lost: nothing changes), else nil.
local specs, tver, unsettled, tl = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local name, spec, space, adaptive = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
assert(#KEYS - 4 == (#ARGV - 4) / 8, 'idcrawl: REGISTER needs one key per lane')
local current = redis.call('HGET', specs, name)
if current then return current end
for k = 5, #KEYS do  -- lanes without their target: P specs was lost, the lanes are not made anew
  if redis.call('EXISTS', KEYS[k]) == 1 then return {'lost', specs} end
end
redis.call('HSET', specs, name, spec)
local k = 5
for i = 5, #ARGV, 8 do
  local lane, start, step, stop = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), ARGV[i + 3]
  local L = KEYS[k]
  k = k + 1
  local reason = ''
  if start < 0 or past(start, step, stop) then reason = 'bound' end
  redis.call('HSET', L, 'start', s(start), 'step', s(step), 'stop', stop, 'margin', ARGV[i + 4],
    'window', ARGV[i + 5], 'neutral', ARGV[i + 6], 'weight', ARGV[i + 7], 'next', s(start), 'fu', s(start),
    'run', '0', 'last', '', 'cut', '', 'reason', reason, 'target', name, 'adaptive', adaptive, 'from', s(start))
  reset_earliest_cut(lane_keys(L), start)
  redis.call('RPUSH', tl, lane)
  if reason == '' then redis.call('SADD', unsettled, lane) end
  changed(prefix_of(specs, 'specs'), lane)
end
if space ~= '' then
  local P = prefix_of(specs, 'specs')
  local base = P .. 'S:' .. space
  redis.call('SADD', base .. ':targets', name)
  if redis.call('SCARD', base .. ':targets') > 1 then
    for _, t in ipairs(redis.call('SMEMBERS', base .. ':targets')) do
      for _, lane in ipairs(redis.call('LRANGE', P .. 'tl:' .. t, 0, -1)) do
        if redis.call('HEXISTS', P .. 'L:' .. lane, 'ids') == 0 then  -- list lanes (resumed holes) share nothing
          redis.call('HSET', P .. 'L:' .. lane, 'space', base, 'lane', lane)
          redis.call('SADD', base .. ':lanes', lane)
        end
      end
    end
  end
end
redis.call('INCR', tver)
return false
