-- urls_common.lua: helpers of the shared URL queue (crawl scope's outlinks, idcrawl.core.urlqueue),
-- put after common.lua in front of the url_*.lua scripts (idcrawl.distributed.scripts).
--
-- Keys (P = the job prefix, cut from P U:<url> or P uhosts):
--   P U:<url>            hash  the URL's entry: owner, col ('' = none), cps (crawl profiles,
--                              "\n"-joined), hops, off (off-site hops), paths ("h:o,h:o": every
--                              path no other beats on both counters), host, st (q queued, p
--                              postponed, t taken, h harvested), w (the worker that took it),
--                              next, last (seconds on the job's clock, '' = none), nf, err, cyc
--                              (counters), claims (JSON [[seed, hops, off], ...]: every seed's paths
--                              no other path of that seed beats, the owner's included; '' or absent:
--                              the owner's paths only), pri (its sitemap priority; '' or absent:
--                              0.5), sum, etag, lm, cap (what its last found harvest read: its
--                              signature, validators ETag and Last-Modified, and its WARC capture
--                              "uri\ndate\ndigest"; '' or absent: none), rat (when that body was read,
--                              seconds; '' or absent: unknown), links ("\n"-joined; absent:
--                              not fetched)
--   P uq:<host>/<group>  zset  ready URLs of a host and yield group (<collection>/<crawl profile>),
--                              scored by minus their priority (URL_TAKE draws among the lowest score)
--   P uqc:<host>         hash  group -> its ready URLs (the yields' draw needs only these counts)
--   P uhosts             hash  host -> its ready URLs (0: field gone)
--   P uhostz             zset  the hosts of P uhosts, all scored 0 (by name: URL_DUE hands them out a
--                              few at a time from a worker's place in the round robin)
--   P uready             string  the ready URLs of every host (the sum of P uhosts, kept as they move)
--   P utaken             hash  url -> the worker that took it (held under the fleet's lease)
--   P upost              set   postponed URLs (released by a later run's start)
--   P uwait              zset  harvested URLs waiting for their revisit, by next harvest time (a
--                              member whose entry changed since is skipped when its time comes)
--   P ustart             string  the worker that reconciled the stored URLs for the running fleet

local function group_of(col, cps)
  local first = string.match(cps, '^[^\n]*')
  return col .. '/' .. first
end

local FIELDS = {'owner', 'col', 'cps', 'hops', 'off', 'paths', 'host', 'st', 'w', 'next', 'last', 'nf', 'err',
  'cyc', 'claims', 'pri', 'sum', 'etag', 'lm', 'cap', 'rat'}

-- the entry of URL key U as a table of its fields, or nil
local function record_of(U)
  local f = redis.call('HMGET', U, unpack(FIELDS))
  if not f[1] then return nil end
  local R = {}
  for i, name in ipairs(FIELDS) do R[name] = f[i] or '' end
  return R
end

-- a reply row: the fields in FIELDS order, then the links ('' with has = 0: not fetched)
local function entry_row(U)
  local R = record_of(U)
  if not R then return {} end
  local row = {}
  for i, name in ipairs(FIELDS) do row[i] = R[name] end
  local links = redis.call('HGET', U, 'links')
  row[#row + 1] = links or ''
  row[#row + 1] = links and 1 or 0
  return row
end

-- the job's host index and ready count (P uhostz, P uready), built once from P uhosts for a queue
-- filed before they were kept
local function host_index(P)
  if redis.call('EXISTS', P .. 'uready') == 1 then return end
  local hosts = redis.call('HGETALL', P .. 'uhosts')
  local ready = 0
  for i = 1, #hosts, 2 do
    ready = ready + tonumber(hosts[i + 1])
    redis.call('ZADD', P .. 'uhostz', 0, hosts[i])
  end
  redis.call('SET', P .. 'uready', s(ready))
end

-- one ready URL more (d = 1) or less (d = -1) on host, in P uhosts, P uhostz and P uready
local function count_ready(P, host, d)
  host_index(P)
  redis.call('INCRBY', P .. 'uready', d)
  local n = redis.call('HINCRBY', P .. 'uhosts', host, d)
  if n <= 0 then
    redis.call('HDEL', P .. 'uhosts', host)
    redis.call('ZREM', P .. 'uhostz', host)
  elseif d > 0 and n == 1 then
    redis.call('ZADD', P .. 'uhostz', 0, host)
  end
end

-- file URL url of entry R (its state R.st) where its state keeps it
local function place(P, url, R)
  if R.st == 'q' then
    local grp = group_of(R.col, R.cps)
    if redis.call('ZADD', P .. 'uq:' .. R.host .. '/' .. grp, -(tonumber(R.pri) or 0.5), url) == 1 then
      redis.call('HINCRBY', P .. 'uqc:' .. R.host, grp, 1)
      count_ready(P, R.host, 1)
    end
  elseif R.st == 't' then
    redis.call('HSET', P .. 'utaken', url, R.w)
  elseif R.st == 'p' then
    redis.call('SADD', P .. 'upost', url)
  end
end

-- take URL url of entry R out of where its state keeps it
local function unplace(P, url, R)
  if R.st == 'q' then
    local grp = group_of(R.col, R.cps)
    if redis.call('ZREM', P .. 'uq:' .. R.host .. '/' .. grp, url) == 1 then
      if redis.call('HINCRBY', P .. 'uqc:' .. R.host, grp, -1) <= 0 then redis.call('HDEL', P .. 'uqc:' .. R.host, grp) end
      count_ready(P, R.host, -1)
    end
  elseif R.st == 't' then
    redis.call('HDEL', P .. 'utaken', url)
  elseif R.st == 'p' then
    redis.call('SREM', P .. 'upost', url)
  end
end

-- change fields of URL url (entry R) to those of the table new, filing it again
local function update(P, url, R, new)
  unplace(P, url, R)
  local args = {}
  for name, value in pairs(new) do
    R[name] = value
    args[#args + 1] = name
    args[#args + 1] = value
  end
  redis.call('HSET', P .. 'U:' .. url, unpack(args))
  place(P, url, R)
end

-- paths "h:o,h:o" as a list of {h, o}
local function parse_paths(text)
  local out = {}
  for h, o in string.gmatch(text, '(%d+):(%d+)') do out[#out + 1] = {tonumber(h), tonumber(o)} end
  return out
end

local function join_paths(paths)
  local parts = {}
  for i, p in ipairs(paths) do parts[i] = s(p[1]) .. ':' .. s(p[2]) end
  return table.concat(parts, ',')
end

-- every seed's claims on entry R as a list of {seed, hops, off} (idcrawl.core.urlqueue.claims_of)
local function claims_of(R)
  if R.claims ~= '' then return cjson.decode(R.claims) end
  local out = {}
  for h, o in string.gmatch(R.paths, '(%d+):(%d+)') do out[#out + 1] = {R.owner, tonumber(h), tonumber(o)} end
  return out
end

-- claims with seed's path {hops, off} (the paths of seed it beats on both counters dropped), or nil
-- when a known path of seed beats it (idcrawl.core.urlqueue.add_claim)
local function add_claim(claims, seed, hops, off)
  local out = {}
  for _, c in ipairs(claims) do
    if c[1] == seed then
      if c[2] <= hops and c[3] <= off then return nil end
      if not (hops <= c[2] and off <= c[3]) then out[#out + 1] = c end
    else
      out[#out + 1] = c
    end
  end
  out[#out + 1] = {seed, hops, off}
  return out
end

-- are the claims text a (as a field holds them, '' : none) and b the same claims, in any order?
local function same_claims(a, b)
  if a == b then return true end
  if a == '' or b == '' then return false end
  local x, y = cjson.decode(a), cjson.decode(b)
  if #x ~= #y then return false end
  local function before(p, q)
    if p[1] ~= q[1] then return p[1] < q[1] end
    if p[2] ~= q[2] then return p[2] < q[2] end
    return p[3] < q[3]
  end
  table.sort(x, before)
  table.sort(y, before)
  for i = 1, #x do
    if x[i][1] ~= y[i][1] or x[i][2] ~= y[i][2] or x[i][3] ~= y[i][3] then return false end
  end
  return true
end

-- the best of paths by (hops, off-site hops)
local function best_path(paths)
  local best = paths[1]
  for _, p in ipairs(paths) do
    if p[1] < best[1] or (p[1] == best[1] and p[2] < best[2]) then best = p end
  end
  return best
end

-- revisits (a crawl profile's revisit, idcrawl.core.scope.revisit_of). spec: '' (no crawl profile has
-- one) or JSON {"pages": [page target names], "profiles": {name: [collection ('' none), seconds]}} of
-- the active crawl profiles (enabled, of an enabled collection or none) with a revisit. Times are
-- seconds on the job's clock, written with 17 significant digits (exact: a Lua number passed to
-- redis.call would be cut to 14).
local function time_text(x) return string.format('%.17g', x) end

-- the seconds from entry R's last harvest to its next (the shortest revisit of its crawl profiles
-- that are active: enabled, and of an enabled collection or none), or nil: harvested once; an id target's hop-0 page: nil
local function revisit_of(R, spec)
  if spec == '' then return nil end
  local job = cjson.decode(spec)
  if R.hops == '0' and R.off == '0' then
    local page = false
    for _, name in ipairs(job.pages) do if name == R.owner then page = true end end
    if not page then return nil end
  end
  local best = nil
  for name in string.gmatch(R.cps, '[^\n]+') do
    local p = job.profiles[name]
    if p and (best == nil or p[2] < best) then best = p[2] end
  end
  return best
end

-- a harvested entry R (found, not found or an error) with a revisit: its next harvest = last + the
-- revisit, and it waits in P uwait for that time (MemoryUrlQueue._schedule); else as it is
local function schedule(P, url, R, spec)
  if R.st ~= 'h' or R.last == '' then return end
  local revisit = revisit_of(R, spec)
  if not revisit then return end
  local nxt = time_text(tonumber(R.last) + revisit)
  R.next = nxt
  redis.call('HSET', P .. 'U:' .. url, 'next', nxt)
  redis.call('ZADD', P .. 'uwait', nxt, url)
end

-- harvested URLs whose next harvest time is at most now are queued again (MemoryUrlQueue._promote)
local function promote(P, now)
  local due = redis.call('ZRANGEBYSCORE', P .. 'uwait', '-inf', now, 'WITHSCORES')
  for i = 1, #due, 2 do
    local url = due[i]
    redis.call('ZREM', P .. 'uwait', url)
    local R = record_of(P .. 'U:' .. url)
    if R and R.st == 'h' and R.next ~= '' and tonumber(R.next) == tonumber(due[i + 1]) then
      update(P, url, R, {st = 'q', next = ''})
    end
  end
end
