-- Keyword search probes these two indexes on every chat. With GIN's fast update (the default)
-- new entries wait in a pending list that every probe reads in full until a vacuum merges it:
-- 19 pending pages (a few hundred memory writes) made a search's keyword statement at 10,000
-- memories take 24 ms instead of 12.5, and the list may grow to gin_pending_list_limit (4 MB)
-- between vacuums. Entries now go straight into the index: a write costs a little more, and a
-- store is searched far more often than written. The list already pending is merged here.
ALTER INDEX memories_terms SET (fastupdate = off);
ALTER INDEX conversations_terms SET (fastupdate = off);
SELECT gin_clean_pending_list('memories_terms'::regclass);
SELECT gin_clean_pending_list('conversations_terms'::regclass);
