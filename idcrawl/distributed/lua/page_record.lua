-- page_record.lua: a found page's record written in the same call as its id's outcome (RECORD),
-- so that no kill separates them (idcrawl.distributed.pagerecords). Put after common.lua, before record.lua.
--
-- The caller appends the page's part after RECORD's own KEYS and ARGV:
--   KEYS: ..., P pages:<target> (hash id -> page record JSON), P pagedue:<target> (zset id by due time)
--   ARGV: ..., 'page', the page's id, its record JSON ('' = delete the record), its due time (seconds,
--         last_crawled + update_duration; '' when deleted), emits ('1': the fetch gets an item)
-- page_args() takes that part off KEYS and ARGV (so the rest of the script sees its own layout).

local PAGE_ARGS = 5

local function page_args()
  local n = #ARGV
  if n < 4 + PAGE_ARGS or ARGV[n - PAGE_ARGS + 1] ~= 'page' then return nil end
  local p = {pages = KEYS[#KEYS - 1], due = KEYS[#KEYS], id = ARGV[n - 3], record = ARGV[n - 2], at = ARGV[n - 1],
    emits = ARGV[n] == '1'}
  table.remove(KEYS)
  table.remove(KEYS)
  for _ = 1, PAGE_ARGS do table.remove(ARGV) end
  return p
end

-- write page record p once its outcome was recorded (r: record_lane's result): not for a duplicate
-- outcome (the first one wrote its record), nor for a page whose item is dropped past the cut (as one
-- process, which writes a page's record with its item: no record says a page was seen whose item is lost)
-- K: the lane's keys, id: the lane's id of the outcome (a list lane's position)
local function write_page(p, r, K, id)
  if p == nil or r == nil or r.duplicate == 1 then return end
  if p.emits and r.cut ~= '' and (id - tonumber(r.cut)) * tonumber(redis.call('HGET', K.hash, 'step')) > 0 then
    return  -- past the lane's cut: the item is never emitted
  end
  if p.record == '' then
    redis.call('HDEL', p.pages, p.id)
    redis.call('ZREM', p.due, p.id)
  else
    redis.call('HSET', p.pages, p.id, p.record)
    redis.call('ZADD', p.due, p.at, p.id)
  end
end
