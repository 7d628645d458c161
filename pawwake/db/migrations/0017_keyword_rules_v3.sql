-- Keyword rules v3: jieba's HMM guessing of unknown words is off (it glued a pronoun to its
-- verb, "我开" / "我想养", and split "做后端" as "做后" + "端"), and English irregular past
-- forms meet their verb ("grew" / "grow"). Stored search_terms were cut by the old rules, so
-- this enqueues the same durable, resumable re-index job as 0013 (pawwake.memory.reindex).
INSERT INTO jobs (kind, dedupe_key, payload)
SELECT 'keyword_reindex', 'rules-3', '{"rules": 3}'::jsonb
WHERE EXISTS (SELECT 1 FROM memories)
   OR EXISTS (SELECT 1 FROM conversations WHERE search_terms IS NOT NULL)
ON CONFLICT (kind, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running') DO NOTHING;
