-- URL_OFFER: an outlink (or a hop-0 page) of the crawl scope offered to the job's shared queue
-- (idcrawl.core.urlqueue.MemoryUrlQueue's rules, atomically for the fleet). The first offer of a URL
-- files it once for the whole fleet; a later offer with the same owner keeps every path that no
-- known path beats on both counters (hops, off-site hops; the entry shows the fewest hops); with
-- another owner the caller decides who owns it (idcrawl.core.scope.choose_owner) and offers again
-- with expect = the owner it read (a compare-and-set).
-- KEYS: P U:<url>.
-- ARGV: url, owner, col, cps, hops, off, host, mode, expect, st0, next, worker, the revisits' spec
--   (urls_common.lua: a harvested URL seeded or re-owned is scheduled again with its new crawl profiles).
--   mode: 'link' (an outlink), 'seed' (a page target's page), 'fetched' (a hop-0 page fetched
--   elsewhere: a found id page; it is filed as taken by worker, its harvest follows).
--   st0, next: the state a URL (re)queued with this owner gets: 'q', or 'p' (postponed) with its
--   next harvest time (the checks at dispatch, decided by the caller).
-- Returns {verdict, entry row}; verdict: 'new' (filed now), 'same' (nothing better), 'better' (a
-- better path of the same owner), 'reowned' (the caller's owner took it), 'owner' (another owner
-- has it: the row says which), 'seeded' (a known URL made the owner's hop-0 page).
local U = KEYS[1]
local url, owner, col, cps, hops, off, host, mode, expect = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]),
  tonumber(ARGV[6]), ARGV[7], ARGV[8], ARGV[9]
local st0, nxt, me, spec = ARGV[10], ARGV[11], ARGV[12], ARGV[13]
local P = prefix_of(U, 'U:' .. url)
local R = record_of(U)
local path = s(hops) .. ':' .. s(off)
local function reply(verdict)
  return {verdict, entry_row(U)}
end
-- a URL (re)filed: taken or harvested stays so; else queued or postponed (st0: the checks at dispatch)
local function requeued(state)
  if state == 't' or state == 'h' then return state, nil end
  if st0 == 'p' then return 'p', nxt end
  return 'q', nil
end
if not R then
  local st, n = requeued('')
  if mode == 'fetched' then st, n = 't', nil end
  R = {host = host, st = ''}
  update(P, url, R, {owner = owner, col = col, cps = cps, hops = s(hops), off = s(off), paths = path, host = host,
    st = st, w = (st == 't') and me or '', next = n or '', last = '', nf = '0', err = '0', cyc = '0'})
  return reply('new')
end
if mode == 'seed' then  -- a page target's page: the specific seed wins (case 1); counters kept
  if R.owner == owner and R.paths == '0:0' then return reply('same') end
  local st, n = requeued(R.st)
  update(P, url, R, {owner = owner, col = col, cps = cps, hops = '0', off = '0', paths = '0:0', st = st,
    next = n or R.next})
  schedule(P, url, R, spec)
  return reply('seeded')
end
if mode == 'fetched' then  -- a found id page: its target's hop-0 page, taken by this worker (harvested next)
  if R.owner == owner and R.paths == '0:0' then return reply('same') end
  redis.call('HDEL', U, 'links')
  update(P, url, R, {owner = owner, col = col, cps = cps, hops = '0', off = '0', paths = '0:0', st = 't', w = me})
  return reply('seeded')
end
if R.owner == owner then
  local kept = {}
  for _, p in ipairs(parse_paths(R.paths)) do
    if p[1] <= hops and p[2] <= off then return reply('same') end  -- beaten by a known path
    if not (hops <= p[1] and off <= p[2]) then kept[#kept + 1] = p end
  end
  kept[#kept + 1] = {hops, off}
  local best = best_path(kept)
  -- the crawl profiles: the known ones first, then the new ones (the yield group stays)
  local merged, seen = {}, {}
  for name in string.gmatch(R.cps .. '\n' .. cps, '[^\n]+') do
    if not seen[name] then
      seen[name] = true
      merged[#merged + 1] = name
    end
  end
  update(P, url, R, {paths = join_paths(kept), hops = s(best[1]), off = s(best[2]), cps = table.concat(merged, '\n')})
  return reply('better')
end
if expect == '' or expect ~= R.owner then return reply('owner') end
local st, n = requeued(R.st)
update(P, url, R, {owner = owner, col = col, cps = cps, hops = s(hops), off = s(off), paths = path, st = st,
  next = n or R.next})
schedule(P, url, R, spec)
return reply('reowned')
