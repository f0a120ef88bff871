-- URL_OFFER: an outlink (or a hop-0 page) of the crawl scope, offered to the job's shared queue.
-- The first offer of a URL queues it once for the whole fleet; later offers keep its best paths:
-- with the same owner, a path that no known path beats on both counters (hops, off-site hops) is
-- added (the record shows the fewest hops); with another owner the caller decides who owns it
-- (idcrawl.core.scope.choose_owner) and offers again with expect = the owner it read.
-- KEYS: P U:<url>.
-- ARGV: url, owner, col, cps, hops, off, host, mode, expect.
--   mode: 'link' (an outlink), 'seed' (a hop-0 page to fetch: a page target's page),
--   'fetched' (a hop-0 page fetched already: a found id page; links = ARGV[10]).
--   expect: '' or the owner the caller read: the URL changes owner if it still has that one.
-- Returns {verdict, links or '', record row...}; verdict: 'new' (queued), 'same' (nothing better),
-- 'better' (a better path of the same owner), 'reowned' (the caller's owner took it), 'owner'
-- (another owner has it: the record tells which), 'seeded' (a hop-0 page known as such now).
-- links: the page's links when it was harvested, to follow again with the new path.
local U = KEYS[1]
local url, owner, col, cps, hops, off, host, mode, expect = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]),
  tonumber(ARGV[6]), ARGV[7], ARGV[8], ARGV[9]
local P = prefix_of(U, 'U:' .. url)
local R = record_of(U)
local path = s(hops) .. ':' .. s(off)
local function reply(verdict, links)
  return {verdict, links or '', record_row(record_of(U))}
end
if not R then
  local st = 'q'
  if mode == 'fetched' then st = 'h' end
  redis.call('HSET', U, 'owner', owner, 'col', col, 'cps', cps, 'hops', s(hops), 'off', s(off), 'paths', path,
    'host', host, 'st', st, 'w', '', 'next', '', 'last', '', 'nf', '0', 'err', '0', 'cyc', '0')
  if mode == 'fetched' then
    redis.call('HSET', U, 'links', ARGV[10] or '')
  else
    ready_add(P, url, host, group_of(col, cps), hops)
  end
  return reply('new')
end
local links = redis.call('HGET', U, 'links') or ''
local function regroup(new_col, new_cps)
  if R.st == 'q' then
    ready_rem(P, url, R.host, group_of(R.col, R.cps))
    ready_add(P, url, R.host, group_of(new_col, new_cps), hops)
  end
end
if mode ~= 'link' then  -- a hop-0 page of owner: the specific seed wins (case 1)
  if R.owner == owner and R.paths == '0:0' then return reply('same') end
  regroup(col, cps)
  redis.call('HSET', U, 'owner', owner, 'col', col, 'cps', cps, 'hops', '0', 'off', '0', 'paths', '0:0')
  if mode == 'fetched' then
    unqueue(P, url, record_of(U))
    redis.call('HSET', U, 'st', 'h', 'links', ARGV[10] or '')
    return reply('seeded')
  end
  return reply('seeded', links)
end
if R.owner == owner then
  local paths, kept = parse_paths(R.paths), {}
  for _, p in ipairs(paths) do
    if p[1] <= hops and p[2] <= off then return reply('same') end  -- beaten by a known path
    if not (hops <= p[1] and off <= p[2]) then kept[#kept + 1] = p end
  end
  kept[#kept + 1] = {hops, off}
  local best = best_path(kept)
  -- the crawl profiles: the known ones first, then the new ones (the group stays the same)
  local merged, seen = {}, {}
  for name in string.gmatch(R.cps .. '\n' .. cps, '[^\n]+') do
    if not seen[name] then
      seen[name] = true
      merged[#merged + 1] = name
    end
  end
  redis.call('HSET', U, 'paths', join_paths(kept), 'hops', s(best[1]), 'off', s(best[2]), 'cps',
    table.concat(merged, '\n'))
  if R.st == 'q' then redis.call('ZADD', P .. 'uq:' .. R.host .. '/' .. group_of(R.col, R.cps), best[1], url) end
  return reply('better', links)
end
if expect == '' or expect ~= R.owner then return reply('owner') end
regroup(col, cps)
redis.call('HSET', U, 'owner', owner, 'col', col, 'cps', cps, 'hops', s(hops), 'off', s(off), 'paths', path)
return reply('reowned', links)
