-- RECORD: record an id's outcome, advance the lane's prefix, cut it at the margin, and
-- release to this worker the outputs of found ids the prefix passed (kept in its emit hash
-- until acknowledged).
-- KEYS: P L:<lane>, its :own, :dec, :pay, :bits, :free, P W:<worker>:emit, P unsettled.
-- ARGV: lane, id, code (0 found, 1 missing, 2 failed, 3 disallowed), payload ('' = none).
-- Returns {fu, next, reason, cut, last, found, missing, failed, disallowed, emitted,
-- overshoot, past_cut, duplicate, settled, lane|id, payload, ...}; {} for an unknown lane.
local K = {hash = KEYS[1], own = KEYS[2], dec = KEYS[3], pay = KEYS[4], bits = KEYS[5], free = KEYS[6]}
local E, unsettled = KEYS[7], KEYS[8]
local lane, id, code, payload = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local f = redis.call('HMGET', K.hash, 'start', 'step', 'margin', 'neutral', 'next', 'fu', 'run', 'last', 'cut',
  'reason')
if not f[1] then return {} end
local start, step, margin, neutral = tonumber(f[1]), tonumber(f[2]), tonumber(f[3]), f[4] == '1'
local nxt, fu, run, last, cut, reason = tonumber(f[5]), tonumber(f[6]), tonumber(f[7]), f[8], f[9], f[10]
local c = {0, 0, 0, 0}  -- found, missing, failed, disallowed (by code + 1)
local emitted, overshoot, past_cut, duplicate = 0, 0, 0, 0
local released = {}
local sid = s(id)
redis.call('HDEL', K.own, sid)
local function reply()
  local settled = 0
  if reason ~= '' and (cut ~= '' or fu == nxt) then settled = 1 end
  local out = {s(fu), s(nxt), reason, cut, last, c[1], c[2], c[3], c[4], emitted, overshoot, past_cut,
    duplicate, settled}
  for _, v in ipairs(released) do out[#out + 1] = v end
  return out
end
if (id - fu) * step < 0 or (id - nxt) * step >= 0 or redis.call('HEXISTS', K.dec, sid) == 1 then
  duplicate = 1
  return reply()
end
redis.call('HSET', K.dec, sid, s(code))
if cut ~= '' then  -- past the cut: counted, never emitted
  past_cut = 1
  if code == 0 then overshoot = 1 end
  redis.call('HINCRBY', K.hash, 'c_past_cut', 1)
  redis.call('HINCRBY', K.hash, 'c_overshoot', overshoot)
  return reply()
end
if code == 0 and payload ~= '' then redis.call('HSET', K.pay, sid, payload) end
local cut_now = false
while true do
  local key = s(fu)
  local o = redis.call('HGET', K.dec, key)
  if not o then break end
  o = tonumber(o)
  redis.call('HDEL', K.dec, key)
  redis.call('BITFIELD', K.bits, 'SET', 'u2', '#' .. s((fu - start) * step), s(o))
  local at = fu
  fu = fu + step
  c[o + 1] = c[o + 1] + 1
  if o == 0 then
    run = 0
    last = key
    local p = redis.call('HGET', K.pay, key)
    if p then
      redis.call('HDEL', K.pay, key)
      local field = lane .. '|' .. key
      redis.call('HSET', E, field, p)
      released[#released + 1] = field
      released[#released + 1] = p
      emitted = emitted + 1
    end
  elseif not (neutral and o == 2) then
    run = run + 1
    if margin > 0 and run >= margin then
      cut = s(at)
      reason = 'margin'
      cut_now = true
      break
    end
  end
end
if cut_now then
  local ahead = redis.call('HGETALL', K.dec)
  for i = 1, #ahead, 2 do
    past_cut = past_cut + 1
    if ahead[i + 1] == '0' then overshoot = overshoot + 1 end
  end
  redis.call('DEL', K.pay, K.free)
end
redis.call('HSET', K.hash, 'fu', s(fu), 'run', s(run), 'last', last, 'cut', cut, 'reason', reason)
local names = {'c_found', 'c_missing', 'c_failed', 'c_disallowed'}
for i = 1, 4 do
  if c[i] > 0 then redis.call('HINCRBY', K.hash, names[i], c[i]) end
end
if emitted > 0 then redis.call('HINCRBY', K.hash, 'c_emitted', emitted) end
if past_cut > 0 then redis.call('HINCRBY', K.hash, 'c_past_cut', past_cut) end
if overshoot > 0 then redis.call('HINCRBY', K.hash, 'c_overshoot', overshoot) end
if reason ~= '' and (cut ~= '' or fu == nxt) then
  redis.call('SREM', unsettled, lane)
  redis.call('DEL', K.own, K.free)
end
return reply()
