-- RECORD: record an id's outcome, advance the lane's prefix, cut it at the margin, and
-- release to this worker the outputs of found ids the prefix passed (kept in its emit hash
-- until acknowledged). In a shared id space (overlapping targets) the lanes that were
-- waiting for this fetch get the outcome too (record_lane and share, common.lua).
-- KEYS: P L:<lane>, its :own, :dec, :pay, :bits, :free, P W:<worker>:emit, P unsettled; for a
--   list lane of resumed holes (ids = positions), also the :bits of the target's lane the id is in.
-- ARGV: lane, id, code (0 found, 1 missing, 2 failed, 3 disallowed), payload ('' = none); for a
--   list lane, the id's position in that lane: its new outcome is written there, so that the job's
--   state shows a refetched hole by its new outcome.
-- Returns {fu, next, reason, cut, last, found, missing, failed, disallowed, emitted,
-- overshoot, past_cut, duplicate, settled, touched, lane|id, payload, ...}; {} for an unknown
-- lane. touched: the other lanes this outcome decided the id of, {lane, fu, next, reason,
-- cut, last, 7 counts, duplicate, settled, id, code} each.
-- Also counts the outcome in P progress (outcomes: the job's progress, read by STATUS).
-- A found page's record may follow in KEYS and ARGV: written with the outcome (page_record.lua).
local page = page_args()
local K = {hash = KEYS[1], own = KEYS[2], dec = KEYS[3], pay = KEYS[4], bits = KEYS[5], free = KEYS[6]}
local E, unsettled = KEYS[7], KEYS[8]
local lane, id, code, payload = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local S = space_of(K)
local fetching = S ~= nil and redis.call('HGET', S.fly, s(id)) == lane
local r = record_lane(K, lane, id, code, payload, E, unsettled, S)
if not r then return {} end
-- the job's progress (STATUS's no-progress rule): outcomes recorded
if r.duplicate == 0 then redis.call('HINCRBY', prefix_of(unsettled, 'unsettled') .. 'progress', 'outcomes', 1) end
write_page(page, r, K, id)
if KEYS[9] and r.duplicate == 0 then
  redis.call('BITFIELD', KEYS[9], 'SET', 'u2', '#' .. ARGV[5], s(code))
  -- the same hole of overlapping targets' resumes (resume.lua): their lanes get the outcome too
  local back = redis.call('HGET', KEYS[1] .. ':back', s(id))
  if back then
    for line in string.gmatch(back, '[^\n]+') do
      local key, pos = string.match(line, '^(.*)\t(%d+)$')
      redis.call('BITFIELD', key, 'SET', 'u2', '#' .. pos, s(code))
    end
    redis.call('HDEL', KEYS[1] .. ':back', s(id))
  end
end
local touched, released = {}, {}
for _, v in ipairs(r.rows) do touched[#touched + 1] = v end  -- lanes this outcome let emit a shared id
for _, v in ipairs(r.released) do released[#released + 1] = v end
if fetching and r.duplicate == 0 then
  local sid = s(id)
  local w = redis.call('HGET', S.wait, sid)
  redis.call('HDEL', S.fly, sid)
  redis.call('HDEL', S.wait, sid)
  if w then
    for other in string.gmatch(w, '[^\n]+') do share(S, other, id, code, E, unsettled, touched, released) end
  end
end
local out = lane_reply(r)
out[#out + 1] = touched
for _, v in ipairs(released) do out[#out + 1] = v end
return out
