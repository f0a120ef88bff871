-- ADOPT: take up to n orphaned outputs into this worker's emit hash.
-- KEYS: P orphans, P W:<worker>:emit.
-- ARGV: n.
-- Returns {lane|id, payload, ...}.
local orphans, E, n = KEYS[1], KEYS[2], tonumber(ARGV[1])
local fields = redis.call('HKEYS', orphans)
local out = {}
for i = 1, math.min(n, #fields) do
  local v = redis.call('HGET', orphans, fields[i])
  redis.call('HDEL', orphans, fields[i])
  redis.call('HSET', E, fields[i], v)
  out[#out + 1] = fields[i]
  out[#out + 1] = v
end
return out
