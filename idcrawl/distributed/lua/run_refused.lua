-- RUN_REFUSED: a worker refused after RUN (bad input: RESUME's conflict) leaves the job as if it had
-- never started (idcrawl.distributed.runs.refused): its heartbeat goes, and a run it started is put back
-- as it was, unless another worker joined that run since (it is in P workers: RUN registers every worker
-- it lets in, and starts a new run only when no other worker is there) or the run is no longer the one it
-- started (P run's n moved on): then the run stays, for the workers in it.
-- KEYS: P run, P workers.
-- ARGV: worker, the number of the run it joined, '1' if it started that run, then P run's n, wave, at, by
--   and ready before it ('' = none).
-- Returns 1 if the run was put back, else 0.
local run, workers = KEYS[1], KEYS[2]
redis.call('ZREM', workers, ARGV[1])
if ARGV[3] ~= '1' or redis.call('HGET', run, 'n') ~= ARGV[2] or redis.call('ZCARD', workers) > 0 then
  return 0
end
if ARGV[4] ~= '' then
  redis.call('HSET', run, 'n', ARGV[4], 'wave', ARGV[5], 'at', ARGV[6])
  if ARGV[7] ~= '' then redis.call('HSET', run, 'by', ARGV[7], 'ready', ARGV[8])
  else redis.call('HDEL', run, 'by', 'ready') end  -- a run from before the reconcile mark
else
  redis.call('DEL', run)
end
return 1
