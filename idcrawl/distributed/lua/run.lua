-- RUN: which run of the fleet a starting worker belongs to (idcrawl.distributed.runs): the one rule
-- that the URL queue (a run's reconcile) and the resume plans (RESUME's run) both follow.
-- KEYS: P run, P workers.
-- ARGV: worker, wave (a watching fleet's later wave: its time in ms on the one clock; '' = none),
--   lease (ms: the lease of a worker's heartbeat, and the run's grace), now ('' = Redis's clock, else
--   the fleet's time in ms: tests drive it).
-- The run in progress (P run: n, its number; wave, '' or its wave; at, ms: it started, or a worker last
-- left the job, release_worker) goes on while another worker is in the job (in P workers, registered
-- here as it joins, until it leaves or a worker reclaims it once its heartbeat is older than the lease:
-- a start-up slower than the lease does not split a fleet) or for a grace of one lease after the run started or
-- a worker left the job; a worker starting then joins it. Joining writes nothing but the worker's
-- heartbeat (a worker refused after joining, RESUME's conflict, removes it: nothing else changed).
-- Watch mode: a wave names its run: a later wave starts a run of its own at once (the last wave's
-- grace does not hold it back), a worker of the wave in progress (or late for an earlier one) joins
-- it whatever the time. Otherwise the worker starts run n + 1.
-- A joining worker takes no URL before the starting worker has reconciled the queue (runs.await_reconciled).
-- The worker's heartbeat is registered in the same script, so of workers starting together one starts
-- the run and the others join it.
-- Returns {n, 'new' | 'joined', then the run's n, wave, at, by and ready before ('' = none)}.
local run, workers = KEYS[1], KEYS[2]
local me, wave, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = now_ms()
if ARGV[4] ~= '' then now = tonumber(ARGV[4]) end
local f = redis.call('HMGET', run, 'n', 'wave', 'at', 'by', 'ready')
local n, current = tonumber(f[1]), f[2] or ''
local joins = false
if n then
  if wave ~= '' then
    joins = current ~= '' and tonumber(wave) <= tonumber(current)
  else
    joins = now - tonumber(f[3] or '0') < lease
    if not joins then  -- a worker of the job (until it leaves, or another reclaims it after its lease)
      for _, w in ipairs(redis.call('ZRANGE', workers, 0, -1)) do
        if w ~= me then joins = true end
      end
    end
  end
end
local verdict = 'joined'
local before = {f[1] or '', current, f[3] or '', f[4] or '', f[5] or ''}  -- the run as it was (a refused worker puts it back)
if not joins then
  n = redis.call('HINCRBY', run, 'n', 1)
  -- by: the worker that starts it reconciles the URL queue; ready: the run it reconciled (runs.reconciled)
  redis.call('HSET', run, 'wave', wave, 'at', s(now), 'by', me, 'ready', '')
  verdict = 'new'
end
redis.call('ZADD', workers, now, me)  -- alive: the run goes on while it is, and for a grace after it left
return {n, verdict, before[1], before[2], before[3], before[4], before[5]}
