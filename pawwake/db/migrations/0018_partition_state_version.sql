-- Rotation saves are compare-and-set on ``version`` (every write of the row bumps it), so
-- the summary model is called outside any transaction. ``rotating_until`` is the lease of the
-- request summarising now: others wait for its result instead of summarising twice.
ALTER TABLE partition_state ADD COLUMN version bigint NOT NULL DEFAULT 0;
ALTER TABLE partition_state ADD COLUMN rotating_until timestamptz;
