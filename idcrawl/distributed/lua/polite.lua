-- POLITE: reserve the next start of a request to a slot for the whole fleet, and again as it leaves.
-- KEYS: P polite:<slot>, "<ms> <token>": the earliest start of the slot's next request, and the
-- request that took the slot last (its token).
-- ARGV: gap_ms, token (one per request).
-- Called when the request is let through (its reservation) and when it leaves for the download
-- handler. As it leaves: if no request took the slot since its reservation, the next start moves to
-- now + gap (the gap runs from the moment it left, however late); if another did, it waits and
-- reserves anew. So the moments requests leave, fleet-wide, are a gap apart.
-- Returns 0 (go now) or the ms to wait.
local key, gap, token = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local now = now_ms()
local allowed, holder = 0, nil
local held = redis.call('GET', key)
if held then
  local at, by = string.match(held, '^(%d+) ?(.*)$')
  allowed, holder = tonumber(at) or 0, by
end
if holder == token then
  allowed = math.max(allowed, now + gap)
elseif now < allowed then
  return allowed - now
else
  allowed = now + gap
end
redis.call('SET', key, s(allowed) .. ' ' .. token, 'PX', math.max(1000, gap * 10))
return 0
