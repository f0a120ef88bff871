-- URL_OFFER: an outlink (or a hop-0 page) of the crawl scope offered to the job's shared queue
-- (idcrawl.core.urlqueue.MemoryUrlQueue's rules, atomically for the fleet). The first offer of a URL
-- files it once for the whole fleet. A later offer adds the offering seed's path to the URL's claims
-- (every seed's paths that no other path of the same seed beats on both counters, hops and off-site
-- hops); the caller then ranks the claimants (idcrawl.core.urlqueue.own) and, if the owner, its
-- paths or its crawl profiles change, writes them with mode 'own' and expect = the claims it read (a
-- compare-and-set: claims changed in between, it ranks again).
-- KEYS: P U:<url>.
-- ARGV: url, owner, col, cps, hops, off, host, mode, expect, st0, next, worker, the revisits' spec
--   (urls_common.lua: a harvested URL seeded or re-owned is scheduled again with its new crawl profiles),
--   paths (mode 'own': the owner's paths, "h:o,h:o").
--   mode: 'link' (an outlink of the seed owner's walk), 'seed' (a page target's page), 'fetched' (a
--   hop-0 page fetched elsewhere: a found id page; it is filed as taken by worker, its harvest
--   follows), 'own' (the owner the caller ranked first, with its record fields).
--   st0, next: the state a URL (re)queued with this owner gets: 'q', or 'p' (postponed) with its
--   next harvest time (the checks at dispatch, decided by the caller); 't' (mode 'link'): a URL filed
--   now is taken by worker (a redirect's new target: the redirected worker follows it), else 'q'.
-- Returns {verdict, entry row}; verdict: 'new' (filed now), 'same' (nothing new), 'claimed' (a new
-- path added to the claims: rank them), 'reowned' / 'better' (mode 'own': written, the owner changed
-- or not), 'changed' (mode 'own': the claims are not those read), 'seeded' (a known URL made the
-- owner's hop-0 page).
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
  if mode == 'fetched' or st0 == 't' then st, n = 't', nil end
  R = {host = host, st = ''}
  update(P, url, R, {owner = owner, col = col, cps = cps, hops = s(hops), off = s(off), paths = path, host = host,
    st = st, w = (st == 't') and me or '', next = n or '', last = '', nf = '0', err = '0', cyc = '0',
    claims = cjson.encode({{owner, hops, off}})})
  return reply('new')
end
if mode == 'own' then  -- the caller's ranking of the claims it read
  if not same_claims(R.claims, expect) then return reply('changed') end
  local st, n = R.st, R.next
  if R.owner ~= owner then
    local st1, n1 = requeued(R.st)
    st, n = st1, n1 or R.next
  end
  local moved = R.owner ~= owner
  update(P, url, R, {owner = owner, col = col, cps = cps, hops = s(hops), off = s(off), paths = ARGV[14], st = st,
    next = n})
  schedule(P, url, R, spec)  -- harvested: its revisit by its crawl profiles now
  if moved then return reply('reowned') end
  return reply('better')
end
if mode == 'seed' or mode == 'fetched' then
  -- a page target's page, or a found id page: its target's hop-0 page (the specific seed wins: case 1);
  -- counters kept; a found id page is taken by this worker (harvested next)
  if R.owner == owner and R.paths == '0:0' then return reply('same') end
  local added = add_claim(claims_of(R), owner, 0, 0)
  -- seeded before, another target's hop-0 page too: that target ranked first (the caller ranks)
  if not added and mode == 'seed' then return reply('same') end
  local claims = added or claims_of(R)
  if mode == 'fetched' then
    redis.call('HDEL', U, 'links')
    update(P, url, R, {owner = owner, col = col, cps = cps, hops = '0', off = '0', paths = '0:0', st = 't', w = me,
      claims = cjson.encode(claims)})
    return reply('seeded')
  end
  local st, n = requeued(R.st)
  update(P, url, R, {owner = owner, col = col, cps = cps, hops = '0', off = '0', paths = '0:0', st = st,
    next = n or R.next, claims = cjson.encode(claims)})
  schedule(P, url, R, spec)
  return reply('seeded')
end
local claims = add_claim(claims_of(R), owner, hops, off)
if not claims then return reply('same') end  -- beaten by a known path of this seed
redis.call('HSET', U, 'claims', cjson.encode(claims))
return reply('claimed')
