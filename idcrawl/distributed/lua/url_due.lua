-- URL_DUE: before a take, the harvested URLs whose revisit is due at now are queued again (promote:
-- the job's clock, passed in, never Redis's own time); then the hosts with ready URLs.
-- KEYS: P uhosts.
-- ARGV: now (seconds on the job's clock).
-- Returns {host, count, ...} (P uhosts).
local P = prefix_of(KEYS[1], 'uhosts')
promote(P, ARGV[1])
return redis.call('HGETALL', KEYS[1])
