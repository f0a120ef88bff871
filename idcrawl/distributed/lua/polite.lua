-- POLITE: reserve the next start time of a request to a slot for the whole fleet.
-- KEYS: P polite:<slot>.
-- ARGV: gap_ms.
-- Returns 0 (go now: the slot's next start is now + gap) or the ms to wait.
local key, gap = KEYS[1], tonumber(ARGV[1])
local now = now_ms()
local allowed = tonumber(redis.call('GET', key) or '0')
if now < allowed then return allowed - now end
redis.call('SET', key, s(now + gap), 'PX', math.max(1000, gap * 10))
return 0
