-- How many times in a row a job waited for a rate-limited provider (HTTP 429). The wait
-- doubles with each one, and past a few of them a rate limit uses up attempts like any
-- failure, so a provider that never lets up cannot keep a job waiting for ever.
ALTER TABLE jobs ADD COLUMN rate_limit_waits integer NOT NULL DEFAULT 0;
