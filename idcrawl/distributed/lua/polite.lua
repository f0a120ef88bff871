-- POLITE: a slot's gap and its requests in flight, held for the whole fleet.
-- KEYS: P polite:<slot>, "<ms> <token>": the earliest start of the slot's next request, and the
-- request that took the slot last (its token); P busy:<slot>, a hash: token -> "<start ms> <until ms>"
-- for each request of the slot in flight fleet-wide, and "lat" -> the ms such a request lasts (a
-- moving average); P workers (a token is "<worker>#<n>").
-- ARGV: op, token, gap_ms, cap, life_ms (an entry's longest life), lease_ms (the workers' lease).
-- KEYS[4..] and ARGV[7..]: places given back before anything else (P busy:<slot> and a token each),
-- the worker's downloads that ended since its last call.
-- op 'reserve' (as the request is let through), 'go' (as it leaves for the download handler: it
-- takes a place in flight), 'done' (its download ended: the place is given back).
-- The gap: as it leaves, if no request took the slot since its reservation, the next start moves to
-- now + gap (the gap runs from the moment it left, however late); if another did, it waits and
-- reserves anew. So the moments requests leave, fleet-wide, are a gap apart. The places: at most
-- cap requests of the slot in flight fleet-wide; a place whose worker stopped (its heartbeat older
-- than the lease) or older than life_ms is free again.
-- Waiting for a place: a request that finds the slot full marks it (field 'wait' of P busy:<slot>); the
-- next place given back publishes on channel P busy:<slot> (the waiting workers' notification) and
-- clears the mark. The wait returned is then until the earliest moment a place frees itself without a
-- notification: a place's life ends, or its worker's lease (heartbeat + lease_ms) runs out.
-- Returns {wait ms (0: go now), why (0 go, 1 the gap, 2 no free place), requests in flight, and for a
-- full slot the ms until its oldest request should be done by how long the slot's requests last (a
-- worker without notifications asks again then)}.
local gkey, bkey, wkey = KEYS[1], KEYS[2], KEYS[3]
local op, token = ARGV[1], ARGV[2]
local gap, cap = tonumber(ARGV[3]), tonumber(ARGV[4])
local life, lease = tonumber(ARGV[5]), tonumber(ARGV[6])
local now = now_ms()

local function give_back(bkey, token)
  local held = redis.call('HGET', bkey, token)
  if held then
    redis.call('HDEL', bkey, token)
    if redis.call('HDEL', bkey, 'wait') == 1 then redis.call('PUBLISH', bkey, token) end  -- a place is free
    local start = tonumber(string.match(held, '^(%d+)'))
    local lat = tonumber(redis.call('HGET', bkey, 'lat'))
    local took = math.max(1, now - start)
    lat = lat and math.floor((3 * lat + took) / 4) or took
    redis.call('HSET', bkey, 'lat', s(lat))
  end
end

for i = 4, #KEYS do
  give_back(KEYS[i], ARGV[i + 3])
end
if op == 'done' then
  give_back(bkey, token)
  return {0, 0, redis.call('HLEN', bkey) - redis.call('HEXISTS', bkey, 'lat') - redis.call('HEXISTS', bkey, 'wait')}
end

-- the gap: may the request start now, and the slot's next start if it does
local allowed, holder, next_start = 0, nil, nil
if gap > 0 then
  local held = redis.call('GET', gkey)
  if held then
    local at, by = string.match(held, '^(%d+) ?(.*)$')
    allowed, holder = tonumber(at) or 0, by
  end
  if holder == token then
    next_start = math.max(allowed, now + gap)
  elseif now < allowed then
    return {allowed - now, 1, 0}
  else
    next_start = now + gap
  end
end

-- the places: the slot's requests in flight, those of stopped workers and stale ones dropped
local flying, oldest, lat = 0, nil, nil
if cap > 0 then
  local entries = redis.call('HGETALL', bkey)
  local live = {}
  for i = 1, #entries, 2 do
    local field, value = entries[i], entries[i + 1]
    if field == 'lat' then
      lat = tonumber(value)
    elseif field ~= token and field ~= 'wait' then
      local start, till = string.match(value, '^(%d+) (%d+)$')
      start, till = tonumber(start), tonumber(till)
      if not till or till <= now then
        redis.call('HDEL', bkey, field)
      else
        live[#live + 1] = {field, start, till}
      end
    end
  end
  if #live >= cap then  -- full: first drop the places of workers that stopped
    for _, entry in ipairs(live) do
      local worker = string.match(entry[1], '^(.*)#%d+$')
      local beat = worker and tonumber(redis.call('ZSCORE', wkey, worker))
      if not beat or beat < now - lease then
        redis.call('HDEL', bkey, entry[1])
        entry[1] = nil
      end
    end
  end
  local soonest = nil  -- the earliest a place frees itself: its life ends, or its worker's lease
  for _, entry in ipairs(live) do
    if entry[1] then
      flying = flying + 1
      oldest = oldest and math.min(oldest, entry[2]) or entry[2]
      local worker = string.match(entry[1], '^(.*)#%d+$')
      local beat = worker and tonumber(redis.call('ZSCORE', wkey, worker))
      local free_at = entry[3]
      if beat then free_at = math.min(free_at, beat + lease + 1) end
      soonest = soonest and math.min(soonest, free_at) or free_at
    end
  end
  if flying >= cap then
    redis.call('HSET', bkey, 'wait', '1')  -- the next place given back notifies the waiting workers
    -- without notifications: ask again when the oldest should be done (by how long the slot's requests last)
    local expect = lat or 50
    local estimate = oldest + expect - now
    if estimate < 1 then estimate = math.floor(expect / 4) end
    return {math.max(2, soonest - now), 2, flying, math.min(1000, math.max(2, estimate))}
  end
end

if next_start then
  redis.call('SET', gkey, s(next_start) .. ' ' .. token, 'PX', math.max(1000, gap * 10))
end
if op == 'go' and cap > 0 then
  redis.call('HSET', bkey, token, s(now) .. ' ' .. s(now + life))
  redis.call('PEXPIRE', bkey, life + lease)
  flying = flying + 1
end
return {0, 0, flying}
