-- DELAY: a retry waits in the shared delayed set; the id is owned by the set meanwhile
-- (a worker that stops does not take it back twice).
-- KEYS: P delayed, P L:<lane>, its :own.
-- ARGV: id, delay_ms, member ("lane\tid\n" + serialised request).
local delayed, L, own = KEYS[1], KEYS[2], KEYS[3]
local now = now_ms()
redis.call('ZADD', delayed, now + tonumber(ARGV[2]), ARGV[3])
if redis.call('EXISTS', L) == 1 then redis.call('HSET', own, ARGV[1], '~delayed') end
return 1
