-- URL_HARVEST: a taken URL was fetched (the seed's "processing the URL itself"): last harvest =
-- now, the not-found counter up on a not-found answer and reset by any other answer but an error,
-- the error counter up on an error and reset by any answer, hops as they are, one cycle more
-- (idcrawl.core.scope.harvested). A found page's links are kept, to be followed again when a
-- better path to it turns up (URL_OFFER). The URL leaves the queue whoever holds it.
-- KEYS: P U:<url>.
-- ARGV: url, worker, result ('found', 'not_found', 'error'), now, next ('' = none), links.
-- Returns the record row, or {} for a URL the job does not know.
local U = KEYS[1]
local url, me, result, now, nxt, links = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local P = prefix_of(U, 'U:' .. url)
local R = record_of(U)
if not R then return {} end
unqueue(P, url, R)
local nf, err = tonumber(R.nf), tonumber(R.err)
if result == 'not_found' then nf = nf + 1 elseif result ~= 'error' then nf = 0 end
if result == 'error' then err = err + 1 else err = 0 end
redis.call('HSET', U, 'st', 'h', 'w', '', 'last', now, 'next', nxt, 'nf', s(nf), 'err', s(err), 'cyc',
  s(tonumber(R.cyc) + 1))
if result == 'found' then redis.call('HSET', U, 'links', links) end
return record_row(record_of(U))
