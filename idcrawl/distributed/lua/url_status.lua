-- URL_STATUS: the shared URL queue at a glance, after giving back the URLs of stopped workers (a
-- taken URL whose worker left the job, or whose heartbeat is older than the lease, is ready again;
-- so is a found page it held, whose links it may not have offered: it is fetched again).
-- KEYS: P uhosts, P workers.
-- ARGV: lease_ms, worker (whose own taken URLs are counted apart).
-- Returns {ready (P uready, never a read of every host), taken by others, taken by this worker, postponed,
-- given back}.
local P = prefix_of(KEYS[1], 'uhosts')
local lease, me = tonumber(ARGV[1]), ARGV[2]
local now = now_ms()
local back, mine, others = 0, 0, 0
local taken = redis.call('HGETALL', P .. 'utaken')
for i = 1, #taken, 2 do
  local w = taken[i + 1]
  local beat = redis.call('ZSCORE', KEYS[2], w)
  if w ~= me and (not beat or tonumber(beat) < now - lease) then
    local R = record_of(P .. 'U:' .. taken[i])
    if R and (R.st == 't' or R.st == 'h') then
      redis.call('HDEL', P .. 'utaken', taken[i])
      update(P, taken[i], R, {st = 'q', w = ''})
      back = back + 1
    else
      redis.call('HDEL', P .. 'utaken', taken[i])
    end
  elseif w == me then
    mine = mine + 1
  else
    others = others + 1
  end
end
host_index(P)
return {tonumber(redis.call('GET', P .. 'uready')), others, mine, redis.call('SCARD', P .. 'upost'), back}
