-- POP_DELAYED: take up to n due retries; each member is "lane\tid\n" + request. The lane's
-- :own key is found in the member, under the prefix of P delayed.
-- KEYS: P delayed.
-- ARGV: worker, n.
local delayed = KEYS[1]
local P = prefix_of(delayed, 'delayed')
local me, n = ARGV[1], tonumber(ARGV[2])
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, n)
for _, member in ipairs(due) do
  redis.call('ZREM', delayed, member)
  local lane, id = string.match(member, '^([^\t]*)\t([^\n]*)\n')
  if lane then
    local own = lane_keys(P .. 'L:' .. lane).own
    if redis.call('HGET', own, id) == '~delayed' then redis.call('HSET', own, id, me) end
  end
end
return due
