-- URL_DUE: before a take, the harvested URLs whose revisit is due at now are queued again (promote:
-- the job's clock, passed in, never Redis's own time); then at most n hosts with ready URLs, in name
-- order from the first after the worker's place in the round robin (wrapping round): never every host.
-- KEYS: P uhosts.
-- ARGV: now (seconds on the job's clock), after (the last host the worker looked at; '' = from the
--   first), n.
-- Returns {ready URLs of every host, host, ...}.
local P = prefix_of(KEYS[1], 'uhosts')
promote(P, ARGV[1])
host_index(P)
local after, n = ARGV[2] or '', tonumber(ARGV[3] or '64')
local out = {tonumber(redis.call('GET', P .. 'uready'))}
local hosts = {}
if after ~= '' then hosts = redis.call('ZRANGEBYLEX', P .. 'uhostz', '(' .. after, '+', 'LIMIT', 0, n) end
if #hosts < n then  -- round again from the first host (up to after itself)
  local upto = '+'
  if after ~= '' then upto = '[' .. after end
  for _, h in ipairs(redis.call('ZRANGEBYLEX', P .. 'uhostz', '-', upto, 'LIMIT', 0, n - #hosts)) do
    hosts[#hosts + 1] = h
  end
end
for _, h in ipairs(hosts) do out[#out + 1] = h end
return out
