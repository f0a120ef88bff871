-- URL_TAKE: take a ready URL of a host for this worker (exclusive: it leaves the ready queue and is
-- held in P utaken under the worker's lease; a worker that stops gives it back, URL_STATUS).
-- KEYS: P uhosts, P workers.
-- ARGV: worker, host, group (<collection>/<crawl profile>: the group the yields' draw chose),
--   r in [0, 1) (which of the group's URLs of its highest priority: the worker's seeded draw).
-- Returns {url, entry row} or {} when the group has no ready URL on the host (any more).
local P = prefix_of(KEYS[1], 'uhosts')
local me, host, grp, r = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
redis.call('ZADD', KEYS[2], now_ms(), me)  -- a heartbeat: the lease of what it takes starts now
local z = P .. 'uq:' .. host .. '/' .. grp
local top = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES')
if #top == 0 then return {} end
local n = redis.call('ZCOUNT', z, top[2], top[2])  -- the URLs of the highest priority (the lowest score)
local i = math.min(n - 1, math.floor(r * n))
local url = redis.call('ZRANGE', z, i, i)[1]
local U = P .. 'U:' .. url
update(P, url, record_of(U), {st = 't', w = me})
return {url, entry_row(U)}
