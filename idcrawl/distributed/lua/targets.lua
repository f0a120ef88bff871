-- TARGETS: a starting worker's targets against the job's: a fleet job's targets are one set.
-- KEYS: P tset (the targets the job's first worker started with), P specs (every target of the job:
--   those, pushed ones and ones added by a merging worker).
-- ARGV: merge ('1': join whatever the job's targets, IDCRAWL_REDIS_MERGE_TARGETS), then the names.
-- The first worker with targets makes its names the set. A later worker is refused when it has a
-- target the job has not (neither in the set nor registered) or lacks one of the set; pushed and
-- added targets it may have or not (a later watch wave has the ones it joined).
-- Returns {'ok'} or {'differs', {its targets the job has not}, {the set's it lacks}}.
local tset, specs = KEYS[1], KEYS[2]
local merge = ARGV[1] == '1'
local set = redis.call('SMEMBERS', tset)
if #set == 0 then
  set = redis.call('HKEYS', specs)  -- a job whose targets were only pushed, or written before the set
  if #set == 0 then
    for i = 2, #ARGV do redis.call('SADD', tset, ARGV[i]) end
    return {'ok'}
  end
end
local mine, inset, extra, missing = {}, {}, {}, {}
for i = 2, #ARGV do mine[ARGV[i]] = true end
for _, name in ipairs(set) do
  inset[name] = true
  if not mine[name] then missing[#missing + 1] = name end
end
for i = 2, #ARGV do
  if not inset[ARGV[i]] and redis.call('HEXISTS', specs, ARGV[i]) == 0 then extra[#extra + 1] = ARGV[i] end
end
if merge or (#extra == 0 and #missing == 0) then return {'ok'} end
table.sort(extra)
table.sort(missing)
return {'differs', extra, missing}
