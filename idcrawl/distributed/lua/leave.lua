-- LEAVE: a worker leaving cleanly: its claims go back to the free lists and its
-- unacknowledged outputs to the orphans at once (no lease timeout to wait for).
-- KEYS: P workers, P unsettled, P orphans, P job, P W:<worker>:emit.
-- ARGV: worker.
-- Returns how many ids went back.
return release_worker(job_keys(), ARGV[1], KEYS[5])
