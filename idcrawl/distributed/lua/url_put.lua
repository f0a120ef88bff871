-- URL_PUT: what a worker decided at dispatch for a URL it took (the seed's harvest checks), or
-- gives back without fetching it.
-- KEYS: P U:<url>.
-- ARGV: url, worker, what, then by what:
--   'back': back to its host's ready queue (this worker will not fetch it);
--   'postpone', next_ms, next (seconds on the job's clock): kept, ready again from next_ms;
--   'drop': out of the queue (kept as dropped: not queued again by a later offer);
--   'reown', owner, col, cps: another target took it (the owner's target is gone); still taken.
-- Returns the record row, or {} when the URL is unknown or another worker holds it now.
local U = KEYS[1]
local url, me, what = ARGV[1], ARGV[2], ARGV[3]
local P = prefix_of(U, 'U:' .. url)
local R = record_of(U)
if not R or R.st ~= 't' or R.w ~= me then return {} end
if what == 'reown' then
  redis.call('HSET', U, 'owner', ARGV[4], 'col', ARGV[5], 'cps', ARGV[6])
  return record_row(record_of(U))
end
unqueue(P, url, R)
if what == 'back' then
  requeue(P, url, R)
elseif what == 'postpone' then
  redis.call('HSET', U, 'st', 'p', 'w', '', 'next', ARGV[5])
  redis.call('ZADD', P .. 'upost', tonumber(ARGV[4]), url)
else
  redis.call('HSET', U, 'st', 'd', 'w', '')
end
return record_row(record_of(U))
