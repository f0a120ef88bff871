-- URL_PUT: a URL's entry changed outside the walk, if it is still in the state the caller read:
-- 'back' (a worker gives back a URL it took and will not fetch: ready again for the fleet), or
-- 'done' (a found page's links are offered: its worker holds it no more, URL_HARVEST), or
-- 'pri' (a sitemap lists the URL with a priority: ARGV[3] is that priority, kept in any state), or
-- 'set' (a run's start reconciled a stored URL with the job file: new owner, collection, crawl
-- profiles, hops, state and next harvest time; 'gone' deletes it).
-- KEYS: P U:<url>.
-- ARGV: url, what, state read (the compare: st, and w for a taken URL; for 'done': the worker);
--   for 'set': owner, col, cps, hops, off, st, next, wait ('1': it waits for its revisit in P uwait
--   at next; '': it does not), the last harvest read (compared too: a URL harvested again since stands),
--   paths ("h:o,h:o": the owner's), claims (urls_common.lua's field; '': the owner's paths only).
-- Returns 1 if changed, 0 if the entry is not as read (another worker changed it).
local U = KEYS[1]
local url, what, seen = ARGV[1], ARGV[2], ARGV[3]
local P = prefix_of(U, 'U:' .. url)
if what == 'done' then
  if redis.call('HGET', P .. 'utaken', url) ~= seen then return 0 end
  redis.call('HDEL', P .. 'utaken', url)
  return 1
end
local R = record_of(U)
if not R then return 0 end
if what == 'pri' then
  if tonumber(R.pri) == tonumber(seen) then return 0 end
  update(P, url, R, {pri = seen})
  return 1
end
local now_seen = R.st
if R.st == 't' then now_seen = 't:' .. R.w end
if now_seen ~= seen then return 0 end
if what == 'set' and tonumber(R.last) ~= tonumber(ARGV[12]) then return 0 end
if what == 'back' then
  update(P, url, R, {st = 'q', w = ''})
elseif ARGV[9] == 'gone' then
  unplace(P, url, R)
  redis.call('DEL', U)
  redis.call('ZREM', P .. 'uwait', url)
else
  update(P, url, R, {owner = ARGV[4], col = ARGV[5], cps = ARGV[6], hops = ARGV[7], off = ARGV[8], st = ARGV[9],
    w = '', next = ARGV[10], paths = ARGV[13], claims = ARGV[14]})
  if ARGV[11] == '1' then
    redis.call('ZADD', P .. 'uwait', ARGV[10], url)
  else
    redis.call('ZREM', P .. 'uwait', url)
  end
end
return 1
