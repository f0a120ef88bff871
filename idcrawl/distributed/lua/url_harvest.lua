-- URL_HARVEST: a URL was fetched (the seed's "processing the URL itself",
-- idcrawl.core.scope.harvested): last harvest = now, the not-found counter up on a not-found
-- answer, kept on an error, reset by a found page; the error counter up on an error, reset by any
-- answer; hops as they are; one cycle more. A found page's links are kept, to be followed again
-- when a better path to it turns up. The URL is harvested whoever held it. A found page stays held
-- by this worker in P utaken until URL_PUT 'done' (its links offered): the fleet is not finished
-- in between, and if the worker stops first, the page is fetched again (URL_STATUS).
-- A found page whose items are not written yet is harvested in two calls: 'links' keeps its links
-- (to be offered; the page stays taken under the worker's lease: if the worker stops first, it is
-- fetched again), then 'written' (its items are written) counts the found harvest.
-- KEYS: P U:<url>.
-- ARGV: url, result ('found', 'not_found', 'error', 'links', 'written'), now, links ('found' and
--   'links' only), worker, the revisits' spec (urls_common.lua: with a revisit its next harvest is
--   now + that, waiting in P uwait; not read for 'links'), for 'found' and 'written' what the harvest
--   read (JSON {sum, etag, lm, cap}: fields set in the entry, idcrawl.core.scope.read_into; '': none, a
--   304: they stay).
-- Returns the entry row, or {} for a URL the job does not know.
local U = KEYS[1]
local url, result, now = ARGV[1], ARGV[2], ARGV[3]
local P = prefix_of(U, 'U:' .. url)
local R = record_of(U)
if not R then return {} end
if result == 'links' then
  redis.call('HSET', U, 'links', ARGV[4])
  return entry_row(U)
end
local nf, err = tonumber(R.nf), tonumber(R.err)
if result == 'not_found' then nf = nf + 1 elseif result ~= 'error' then nf = 0 end
if result == 'error' then err = err + 1 else err = 0 end
local new = {st = 'h', w = '', last = now, next = '', nf = s(nf), err = s(err), cyc = s(tonumber(R.cyc) + 1)}
if (result == 'found' or result == 'written') and ARGV[7] and ARGV[7] ~= '' then
  for name, value in pairs(cjson.decode(ARGV[7])) do new[name] = value end
end
update(P, url, R, new)
schedule(P, url, R, ARGV[6])
if result == 'found' then
  redis.call('HSET', U, 'links', ARGV[4])
  redis.call('HSET', P .. 'utaken', url, ARGV[5])
end
return entry_row(U)
