-- URL_TAKE: take a ready URL of a host for this worker (exclusive: it leaves the ready queue and is
-- held in P utaken under the worker's lease; a worker that stops gives it back, URL_STATUS).
-- KEYS: P uhosts, P workers.
-- ARGV: worker, host, group (<collection>/<crawl profile>: the group the yields' draw chose; ''
--   = the host's first group), r in [0, 1) (which of the group's URLs: the worker's seeded draw).
-- Returns {url, record row} or {} when the host (or the group) has no ready URL.
local P = prefix_of(KEYS[1], 'uhosts')
local me, host, grp, r = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
redis.call('ZADD', KEYS[2], now_ms(), me)  -- a heartbeat: the lease of what it takes starts now
if grp == '' then
  local groups = redis.call('HKEYS', P .. 'uqc:' .. host)
  if #groups == 0 then return {} end
  table.sort(groups)
  grp = groups[1]
end
local z = P .. 'uq:' .. host .. '/' .. grp
local n = redis.call('ZCARD', z)
if n == 0 then return {} end
local i = math.min(n - 1, math.floor(r * n))
local url = redis.call('ZRANGE', z, i, i)[1]
ready_rem(P, url, host, grp)
redis.call('HSET', P .. 'U:' .. url, 'st', 't', 'w', me)
redis.call('HSET', P .. 'utaken', url, me)
return {url, record_row(record_of(P .. 'U:' .. url))}
