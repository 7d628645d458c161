-- Keyword rules v2: English terms are stemmed (Snowball) with possessives and contraction
-- stopwords dropped, and Chinese words also store their single characters. Stored
-- search_terms were made by the old rules. SQL cannot run jieba or the stemmer, so this only
-- enqueues the durable, resumable re-index job (pawwake.memory.reindex) that re-tokenises
-- every memory and every indexed conversation message in batches. Until it reaches a row,
-- the row keeps its old terms and stays searchable. A database with nothing indexed yet
-- (a new install) gets no job.
INSERT INTO jobs (kind, dedupe_key, payload)
SELECT 'keyword_reindex', 'rules-2', '{"rules": 2}'::jsonb
WHERE EXISTS (SELECT 1 FROM memories)
   OR EXISTS (SELECT 1 FROM conversations WHERE search_terms IS NOT NULL)
ON CONFLICT (kind, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running') DO NOTHING;
