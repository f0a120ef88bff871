-- urls_common.lua: helpers of the shared URL queue (crawl scope's outlinks), put after common.lua
-- in front of the url_*.lua scripts (idcrawl.distributed.scripts).
--
-- Keys (P = the job prefix, cut from P U:<url> or P uhosts):
--   P U:<url>            hash  the URL's record: owner, col ('' = none), cps (crawl profiles,
--                              "\n"-joined), hops, off (off-site hops), paths ("h:o,h:o": every
--                              path no other beats on both counters), host, st (q queued, t taken,
--                              h harvested, p postponed, d dropped), w (the worker that took it),
--                              next, last (seconds on the job's clock, '' = none), nf, err, cyc
--                              (counters), links ("\n"-joined, once harvested)
--   P uq:<host>/<group>  zset  ready URLs of a host and group (<collection>/<crawl profile>), by hops
--   P uqc:<host>         hash  group -> its ready URLs (the yields' draw needs only these counts)
--   P uhosts             hash  host -> its ready URLs (0: field gone)
--   P utaken             hash  url -> the worker that took it (claimed under the fleet's lease)
--   P upost              zset  postponed URLs by the time (ms) they become ready again

local function group_of(col, cps)
  local first = string.match(cps, '^[^\n]*')
  return col .. '/' .. first
end

local function ready_add(P, url, host, grp, hops)
  if redis.call('ZADD', P .. 'uq:' .. host .. '/' .. grp, hops, url) == 1 then
    redis.call('HINCRBY', P .. 'uqc:' .. host, grp, 1)
    redis.call('HINCRBY', P .. 'uhosts', host, 1)
  end
end

local function ready_rem(P, url, host, grp)
  if redis.call('ZREM', P .. 'uq:' .. host .. '/' .. grp, url) == 1 then
    if redis.call('HINCRBY', P .. 'uqc:' .. host, grp, -1) <= 0 then redis.call('HDEL', P .. 'uqc:' .. host, grp) end
    if redis.call('HINCRBY', P .. 'uhosts', host, -1) <= 0 then redis.call('HDEL', P .. 'uhosts', host) end
  end
end

-- the record R (a table of its fields) of URL key U, or nil
local FIELDS = {'owner', 'col', 'cps', 'hops', 'off', 'paths', 'host', 'st', 'w', 'next', 'last', 'nf', 'err',
  'cyc'}
local function record_of(U)
  local f = redis.call('HMGET', U, unpack(FIELDS))
  if not f[1] then return nil end
  local R = {}
  for i, name in ipairs(FIELDS) do R[name] = f[i] or '' end
  return R
end

-- the reply row of a record: the fields in FIELDS order
local function record_row(R)
  local row = {}
  for i, name in ipairs(FIELDS) do row[i] = R[name] end
  return row
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

-- take URL U (record R) out of the ready queues, the taken hash and the postponed set
local function unqueue(P, url, R)
  if R.st == 'q' then ready_rem(P, url, R.host, group_of(R.col, R.cps)) end
  if R.st == 't' then redis.call('HDEL', P .. 'utaken', url) end
  if R.st == 'p' then redis.call('ZREM', P .. 'upost', url) end
end

-- put URL U (record R) back in its host's ready queue
local function requeue(P, url, R)
  redis.call('HSET', P .. 'U:' .. url, 'st', 'q', 'w', '')
  ready_add(P, url, R.host, group_of(R.col, R.cps), tonumber(R.hops))
end
