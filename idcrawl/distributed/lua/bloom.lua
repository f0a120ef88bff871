-- BLOOM: set (add = 1) or test (add = 0) the k bits of one fingerprint in its shard of the
-- job's Bloom filter (idcrawl.distributed.dupefilters.RedisBloomSeen).
-- KEYS: P bloom:count, P bloom:<shard>.
-- ARGV: add (1 or 0), then the bit positions.
-- Returns 1 if every bit was set already.
local count_key, key, add = KEYS[1], KEYS[2], ARGV[1] == '1'
local all = 1
for i = 2, #ARGV do
  if redis.call('GETBIT', key, ARGV[i]) == 0 then
    all = 0
    if add then redis.call('SETBIT', key, ARGV[i], 1) end
  end
end
if add and all == 0 then redis.call('INCR', count_key) end
return all
