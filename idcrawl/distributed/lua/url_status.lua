-- URL_STATUS: the shared URL queue at a glance, after giving back the URLs of stopped workers (a
-- taken URL whose worker left the job or whose heartbeat is older than the lease goes back to its
-- host's ready queue) and making due postponed URLs ready again.
-- KEYS: P uhosts, P workers.
-- ARGV: lease_ms.
-- Returns {ready, taken, postponed, given back, next postponed due in ms or -1, host, count, ...}.
local P = prefix_of(KEYS[1], 'uhosts')
local lease = tonumber(ARGV[1])
local now = now_ms()
local back = 0
local taken = redis.call('HGETALL', P .. 'utaken')
for i = 1, #taken, 2 do
  local beat = redis.call('ZSCORE', KEYS[2], taken[i + 1])
  if not beat or tonumber(beat) < now - lease then
    local R = record_of(P .. 'U:' .. taken[i])
    redis.call('HDEL', P .. 'utaken', taken[i])
    if R and R.st == 't' then
      requeue(P, taken[i], R)
      back = back + 1
    end
  end
end
for _, url in ipairs(redis.call('ZRANGEBYSCORE', P .. 'upost', '-inf', now)) do
  redis.call('ZREM', P .. 'upost', url)
  local R = record_of(P .. 'U:' .. url)
  if R and R.st == 'p' then requeue(P, url, R) end
end
local due = redis.call('ZRANGE', P .. 'upost', 0, 0, 'WITHSCORES')
local next_due = -1
if #due > 0 then next_due = math.max(0, tonumber(due[2]) - now) end
local hosts = redis.call('HGETALL', P .. 'uhosts')
local ready = 0
for i = 2, #hosts, 2 do ready = ready + tonumber(hosts[i]) end
local out = {ready, redis.call('HLEN', P .. 'utaken'), redis.call('ZCARD', P .. 'upost'), back, next_due}
for _, v in ipairs(hosts) do out[#out + 1] = v end
return out
