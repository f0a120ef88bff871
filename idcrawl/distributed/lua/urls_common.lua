-- urls_common.lua: helpers of the shared URL queue (crawl scope's outlinks, idcrawl.core.urlqueue),
-- put after common.lua in front of the url_*.lua scripts (idcrawl.distributed.scripts).
--
-- Keys (P = the job prefix, cut from P U:<url> or P uhosts):
--   P U:<url>            hash  the URL's entry: owner, col ('' = none), cps (crawl profiles,
--                              "\n"-joined), hops, off (off-site hops), paths ("h:o,h:o": every
--                              path no other beats on both counters), host, st (q queued, p
--                              postponed, t taken, h harvested), w (the worker that took it),
--                              next, last (seconds on the job's clock, '' = none), nf, err, cyc
--                              (counters), links ("\n"-joined; absent: not fetched)
--   P uq:<host>/<group>  zset  ready URLs of a host and yield group (<collection>/<crawl profile>)
--   P uqc:<host>         hash  group -> its ready URLs (the yields' draw needs only these counts)
--   P uhosts             hash  host -> its ready URLs (0: field gone)
--   P utaken             hash  url -> the worker that took it (held under the fleet's lease)
--   P upost              set   postponed URLs (released by a later run's start)
--   P ustart             string  the worker that reconciled the stored URLs for the running fleet

local function group_of(col, cps)
  local first = string.match(cps, '^[^\n]*')
  return col .. '/' .. first
end

local FIELDS = {'owner', 'col', 'cps', 'hops', 'off', 'paths', 'host', 'st', 'w', 'next', 'last', 'nf', 'err',
  'cyc'}

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

-- file URL url of entry R (its state R.st) where its state keeps it
local function place(P, url, R)
  if R.st == 'q' then
    local grp = group_of(R.col, R.cps)
    if redis.call('ZADD', P .. 'uq:' .. R.host .. '/' .. grp, tonumber(R.hops), url) == 1 then
      redis.call('HINCRBY', P .. 'uqc:' .. R.host, grp, 1)
      redis.call('HINCRBY', P .. 'uhosts', R.host, 1)
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
      if redis.call('HINCRBY', P .. 'uhosts', R.host, -1) <= 0 then redis.call('HDEL', P .. 'uhosts', R.host) end
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

-- the best of paths by (hops, off-site hops)
local function best_path(paths)
  local best = paths[1]
  for _, p in ipairs(paths) do
    if p[1] < best[1] or (p[1] == best[1] and p[2] < best[2]) then best = p end
  end
  return best
end
