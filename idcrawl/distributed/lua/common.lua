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

-- take ids (strings) of lane K from worker w: undecided ones go to the lane's free list;
-- returns how many
local function give_back(K, w, ids)
  local f = redis.call('HMGET', K.hash, 'step', 'fu', 'next', 'cut')
  if not f[1] then return 0 end
  local step, fu, nxt, cut = tonumber(f[1]), tonumber(f[2]), tonumber(f[3]), f[4]
  local n = 0
  for _, sid in ipairs(ids) do
    if redis.call('HGET', K.own, sid) == w then
      redis.call('HDEL', K.own, sid)
      if undecided(K, tonumber(sid), step, fu, nxt, cut) then
        redis.call('RPUSH', K.free, sid)
        n = n + 1
      end
    end
  end
  return n
end

-- give back what worker w held: its undecided ids to the free lists, its unacknowledged
-- outputs (its emit hash E) to the orphans
local function release_worker(J, w, E)
  local taken = 0
  for _, lane in ipairs(redis.call('SMEMBERS', J.unsettled)) do
    local K = lane_keys(J.P .. 'L:' .. lane)
    local own = redis.call('HGETALL', K.own)
    local held = {}
    for i = 1, #own, 2 do
      if own[i + 1] == w then held[#held + 1] = own[i] end
    end
    if #held > 0 then taken = taken + give_back(K, w, held) end
  end
  local emit = redis.call('HGETALL', E)
  for i = 1, #emit, 2 do
    redis.call('HSET', J.orphans, emit[i], emit[i + 1])
  end
  redis.call('DEL', E)
  redis.call('ZREM', J.workers, w)
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
