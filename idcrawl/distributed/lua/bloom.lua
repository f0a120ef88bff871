-- BLOOM: set (add = 1) or test (add = 0) the k bits of a batch of fingerprints, each in its shard
-- of the job's Bloom filter (idcrawl.distributed.dupefilters.RedisBloomSeen): the adds a worker
-- deferred travel with its next test, in one call.
-- KEYS: P bloom:count, then the shards the batch touches (P bloom:<shard>).
-- ARGV: k (bits per fingerprint), then per fingerprint: add (1 or 0), the index of its shard in KEYS,
--       its k bit positions.
-- Returns, per fingerprint in order, 1 if every bit was set already (before it), else 0.
local count_key, k = KEYS[1], tonumber(ARGV[1])
local replies = {}
local i = 2
while i <= #ARGV do
  local add, key = ARGV[i] == '1', KEYS[tonumber(ARGV[i + 1])]
  local all = 1
  for j = i + 2, i + 1 + k do
    if redis.call('GETBIT', key, ARGV[j]) == 0 then
      all = 0
      if add then redis.call('SETBIT', key, ARGV[j], 1) end
    end
  end
  if add and all == 0 then redis.call('INCR', count_key) end
  replies[#replies + 1] = all
  i = i + 2 + k
end
return replies
