-- Background work never drops a fact: retries spread over about a day, then a dead-letter
-- state that keeps the job until someone retries or discards it.
--   dead       every attempt failed; kept, shown on the dashboard, retryable
--   discarded  a person gave up on it (kept for the record, never run again)
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('pending', 'running', 'done', 'failed', 'dead', 'discarded'));

-- The model the last run used, so a failure can be told apart by provider/model.
ALTER TABLE jobs ADD COLUMN model text;

ALTER TABLE jobs ALTER COLUMN max_attempts SET DEFAULT 12;
UPDATE jobs SET max_attempts = 12 WHERE status IN ('pending', 'running') AND max_attempts = 5;

-- Before this migration a job that used up its attempts was marked 'failed' without a result
-- (a handler's deliberate failure always carries one): those are dead letters.
UPDATE jobs SET status = 'dead', updated_at = now() WHERE status = 'failed' AND result IS NULL;

-- The status page and the jobs view read what needs attention without scanning done jobs.
CREATE INDEX jobs_attention ON jobs (updated_at DESC)
    WHERE status IN ('pending', 'running', 'failed', 'dead');
