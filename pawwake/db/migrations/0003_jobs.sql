-- Durable background work: claimed with FOR UPDATE SKIP LOCKED, retried with backoff.

CREATE TABLE jobs (
    id            bigserial PRIMARY KEY,
    kind          text NOT NULL,
    dedupe_key    text,
    payload       jsonb NOT NULL DEFAULT '{}'::jsonb,
    status        text NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'running', 'done', 'failed')),
    attempts      integer NOT NULL DEFAULT 0,
    max_attempts  integer NOT NULL DEFAULT 5,
    run_after     timestamptz NOT NULL DEFAULT now(),
    claimed_until timestamptz,
    progress      jsonb NOT NULL DEFAULT '{}'::jsonb,
    result        jsonb,
    last_error    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
-- At most one unfinished job per dedupe key (e.g. one extraction per session and round).
CREATE UNIQUE INDEX jobs_dedupe ON jobs (kind, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running');
CREATE INDEX jobs_ready ON jobs (run_after) WHERE status IN ('pending', 'running');
CREATE INDEX jobs_kind_recent ON jobs (kind, created_at DESC);
