-- A failed partition summary (or fold) is retried by the next request, as Pawwake 4.x did,
-- instead of waiting five minutes: the retry time is no longer kept. The live history stays
-- capped at 3X rounds meanwhile, and the last failure is still shown.
ALTER TABLE partition_state DROP COLUMN summary_retry_after;
