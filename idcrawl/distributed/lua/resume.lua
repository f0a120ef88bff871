-- RESUME: a worker started with resume=auto|bound|holes|all|due registers that resume of a target for
-- the job, or joins the one in progress. A resume is in progress while one of its lanes is
-- unsettled, or while the fleet's run that planned it goes on (the worker belongs to it: RUN,
-- idcrawl.distributed.runs, the one rule of a fleet's run): a worker started with the same
-- arguments then joins it (nothing is planned twice), one with other arguments is refused (a worker with
-- the default, auto, is told so and joins the job as it is; a plan of auto gives way). Otherwise
-- the worker's plan becomes the job's: the cut lanes it names go on from
-- their restart id (bound, all, due; each reopening counts one more walk in the lane's walk
-- field), and the hole ids become a new list lane <base> (first resume) or <base><n> (the
-- n-th), walked by position 0..#ids-1 with no margin; so do the ids of each more list lane
-- (<target>:late<n>, the late ids of a due resume). A due resume whose tails are not due
-- names no lane: it registers the plan "nothing to fetch", which later workers join.
-- KEYS: P R:<target>, P unsettled, P workers, P tl:<target>.
-- ARGV: worker, args (the resume's arguments, compared as text), base (lane name of the
--   holes), target, window, neutral, weight, run (the worker's run of the fleet, RUN's n),
--   n (reopened lanes), then n triples (lane, restart id, reach: '' none; misses at or before it do not
--   count toward the margin, a tail told of newer ids by a sitemap), then m (more list lanes), the count of the hole
--   ids and the hole ids in order, then m times: a list lane's name, its count, its ids (late ids).
-- A registered resume adds the target to P resumed; a new list lane or reopened lane also
-- bumps P tver, so that workers already running join them (RedisFrontier.join_list_lanes).
-- Returns {'created' | 'joined', lane...} (the resume's lanes: reopened ones, then the list
-- lane), or {'conflict', args of the resume in progress}.
-- Watch mode (distributed/worker.py): each later wave of a watching fleet is a run of its own (RUN), its
-- args ending with ', wave=<ms>' (the wave's time on the one clock, the same for every worker): the
-- first worker awake for it plans, the others join; a worker late for a wave, or a due run started
-- while a wave is in progress, joins the wave's plan (arguments compared without the wave).
local R, unsettled, workers, tl = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local P = prefix_of(unsettled, 'unsettled')
local me, args, base, target = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local window, neutral, weight, run, n = ARGV[5], ARGV[6], ARGV[7], ARGV[8], tonumber(ARGV[9])
local RL, RW = R .. ':lanes', R .. ':w'
local function unwaved(a)  -- the resume's arguments without the wave
  return (string.gsub(a, ', wave=%d+$', ''))
end
local current = redis.call('HGET', R, 'args')
if current then
  local active = redis.call('HGET', R, 'run') == run
  for _, lane in ipairs(redis.call('SMEMBERS', RL)) do
    if redis.call('SISMEMBER', unsettled, lane) == 1 then active = true end  -- still walked
  end
  if active and unwaved(current) == unwaved(args) then
    redis.call('SADD', RW, me)
    local out = {'joined'}
    for _, lane in ipairs(redis.call('LRANGE', R .. ':order', 0, -1)) do out[#out + 1] = lane end
    return out
  end
  -- the default's plan (auto) gives way to an explicit resume, which it does not name (planned below)
  if active and unwaved(current) ~= 'resume=auto' then return {'conflict', current} end
end
-- auto (as bound) names no list lane: only other resumes number the holes lanes
local gen = 0
if args ~= 'resume=auto' then gen = redis.call('HINCRBY', R, 'gen', 1) end
redis.call('DEL', RL, RW, R .. ':order')
redis.call('SADD', RW, me)
redis.call('HSET', R, 'args', args, 'run', run)
local out = {'created'}
local function add(lane)
  redis.call('SADD', RL, lane)
  redis.call('RPUSH', R .. ':order', lane)
  out[#out + 1] = lane
  changed(P, lane)  -- reopened or made: STATUS shows it to the workers that walk it
end
local i = 10
for _ = 1, n do
  local lane, restart, reach = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  i = i + 3
  local K = lane_keys(P .. 'L:' .. lane)
  local f = redis.call('HMGET', K.hash, 'cut', 'reason')
  if f[1] and f[1] ~= '' and f[2] == 'margin' then  -- cut by its margin: goes on from restart
    redis.call('HSET', K.hash, 'fu', restart, 'next', restart, 'run', '0', 'cut', '', 'reason', '', 'from', restart,
      'reach', reach)
    reset_earliest_cut(K, tonumber(restart))
    redis.call('HINCRBY', K.hash, 'walk', 1)  -- a new walk of the lane (a tail's schedule: distributed/tails.py)
    redis.call('DEL', K.dec, K.pay, K.free)
    redis.call('SADD', unsettled, lane)
    add(lane)
  end
end
-- Holes of overlapping targets (one id space): an id that the list lane of another target's
-- resume in progress refetches is not fetched again. Its outcome goes into this target's lane
-- at once if that lane decided it, or when it does (the other lane's :back hash, record.lua).
local first = redis.call('LINDEX', tl, 0)
local space = first and redis.call('HGET', P .. 'L:' .. first, 'space')
local taken, own = nil, nil
local function shared(holes)
  if taken == nil then
    taken, own = {}, {}  -- id -> {list lane key, position}; this target's walking lanes: {bits key, start, step}
    for _, t in ipairs(redis.call('SMEMBERS', space .. ':targets')) do
      if t ~= target then
        for _, l in ipairs(redis.call('SMEMBERS', P .. 'R:' .. t .. ':lanes')) do
          local L2 = P .. 'L:' .. l
          if redis.call('SISMEMBER', unsettled, l) == 1 and redis.call('HEXISTS', L2, 'ids') == 1 then
            for pos, id in ipairs(redis.call('LRANGE', L2 .. ':ids', 0, -1)) do taken[id] = {L2, pos - 1} end
          end
        end
      end
    end
    for _, l in ipairs(redis.call('LRANGE', tl, 0, -1)) do
      local f = redis.call('HMGET', P .. 'L:' .. l, 'start', 'step', 'ids')
      if f[1] and not f[3] then own[#own + 1] = {P .. 'L:' .. l .. ':bits', tonumber(f[1]), tonumber(f[2])} end
    end
  end
  local keep = {}
  for _, id in ipairs(holes) do
    local other = taken[id]
    local at = nil
    if other then
      for _, o in ipairs(own) do
        if at == nil and (tonumber(id) - o[2]) * o[3] >= 0 then at = {o[1], (tonumber(id) - o[2]) * o[3]} end
      end
    end
    if at == nil then
      keep[#keep + 1] = id
    else
      local L2, pos = other[1], other[2]
      local code = nil
      if pos < tonumber(redis.call('HGET', L2, 'fu')) then
        code = redis.call('BITFIELD', L2 .. ':bits', 'GET', 'u2', '#' .. s(pos))[1]
      else
        code = redis.call('HGET', L2 .. ':dec', s(pos))
      end
      if code then
        redis.call('BITFIELD', at[1], 'SET', 'u2', '#' .. s(at[2]), s(code))
      else
        local w = redis.call('HGET', L2 .. ':back', s(pos))
        local line = at[1] .. '\t' .. s(at[2])
        redis.call('HSET', L2 .. ':back', s(pos), w and (w .. '\n' .. line) or line)
      end
    end
  end
  return keep
end
local function list_lane(name, holes)
  if space and #holes > 0 then holes = shared(holes) end
  local count = #holes
  if count == 0 then return end
  local lane = name
  if gen > 1 then lane = name .. s(gen) end
  local L = P .. 'L:' .. lane
  redis.call('DEL', L, L .. ':ids', L .. ':own', L .. ':free', L .. ':dec', L .. ':pay', L .. ':bits', L .. ':back')
  redis.call('HSET', L, 'start', '0', 'step', '1', 'stop', s(count - 1), 'margin', '0', 'window', window,
    'neutral', neutral, 'weight', weight, 'next', '0', 'fu', '0', 'run', '0', 'last', '', 'cut', '', 'reason', '',
    'target', target, 'ids', '1')
  for j = 1, #holes, 1000 do
    redis.call('RPUSH', L .. ':ids', unpack(holes, j, math.min(j + 999, #holes)))
  end
  redis.call('RPUSH', tl, lane)
  redis.call('SADD', unsettled, lane)
  add(lane)
end
-- the list lanes: base's ids first (holes, or due pages), then m more lanes (name, count, ids) (late ids)
local m = tonumber(ARGV[i])
local count = tonumber(ARGV[i + 1])
local holes = {}
for j = i + 2, i + 1 + count do holes[#holes + 1] = ARGV[j] end
list_lane(base, holes)
i = i + 2 + count
for _ = 1, m do
  local name, c = ARGV[i], tonumber(ARGV[i + 1])
  local ids = {}
  for j = i + 2, i + 1 + c do ids[#ids + 1] = ARGV[j] end
  list_lane(name, ids)
  i = i + 2 + c
end
redis.call('SADD', P .. 'resumed', target)  -- release_worker stamps its at when a worker of it leaves
if #out > 1 then redis.call('INCR', P .. 'tver') end  -- workers already running join the new lanes
return out
