-- The questions the memory model wrote for a memory (memories.model_questions), one row each,
-- so each gets a vector of its own: a user's question is then matched against the questions
-- a memory answers, best cosine first, not only against the memory's own words.
--
-- The rows follow model_questions by trigger, in the writing statement's transaction, so
-- every writer (extraction, imports, the describe job, edits, merges, restores) keeps them
-- consistent without a step of its own; deleting a memory deletes them (cascade), archiving
-- keeps them (search reads active memories only). A question row is never rewritten: a
-- changed list deletes the questions that went and adds the new ones, so a vector (keyed by
-- the question row) stays current for as long as its row exists.
CREATE TABLE memory_questions (
    id        bigserial PRIMARY KEY,
    memory_id bigint NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    content   text NOT NULL CHECK (btrim(content) <> ''),
    UNIQUE (memory_id, content)
);

-- One vector per question, with the columns of memory_embeddings (provenance, digest of the
-- text, real[]; with pgvector an HNSW expression index per provenance at run time), keyed by
-- the question instead of the memory.
CREATE TABLE memory_question_embeddings (
    question_id bigint PRIMARY KEY REFERENCES memory_questions (id) ON DELETE CASCADE,
    LIKE memory_embeddings INCLUDING DEFAULTS
);
ALTER TABLE memory_question_embeddings DROP COLUMN memory_id;
CREATE INDEX memory_question_embeddings_recent
    ON memory_question_embeddings (provider, model, dim, created_at)
    INCLUDE (question_id, content_sha);
CREATE INDEX memory_question_embeddings_by_question
    ON memory_question_embeddings (provider, model, dim, question_id)
    INCLUDE (created_at, content_sha);

-- The trigger function lives in a schema of its own, outside the tables' schema: a rollback
-- to Pawwake 4.x (db/legacy/aside.py) moves our tables away and must leave that schema as 4.x
-- had it.
CREATE SCHEMA IF NOT EXISTS pawwake_internal;
CREATE OR REPLACE FUNCTION pawwake_internal.memory_questions_follow() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_questions
        WHERE memory_id = NEW.id AND NOT (content = ANY (NEW.model_questions));
    INSERT INTO memory_questions (memory_id, content)
        SELECT DISTINCT NEW.id, q FROM unnest(NEW.model_questions) AS q WHERE btrim(q) <> ''
        ON CONFLICT (memory_id, content) DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER memory_questions_on_insert AFTER INSERT ON memories
    FOR EACH ROW WHEN (NEW.model_questions <> '{}')
    EXECUTE FUNCTION pawwake_internal.memory_questions_follow();
CREATE TRIGGER memory_questions_on_update AFTER UPDATE OF model_questions ON memories
    FOR EACH ROW WHEN (OLD.model_questions IS DISTINCT FROM NEW.model_questions)
    EXECUTE FUNCTION pawwake_internal.memory_questions_follow();

INSERT INTO memory_questions (memory_id, content)
    SELECT DISTINCT m.id, q FROM memories m CROSS JOIN LATERAL unnest(m.model_questions) AS q
    WHERE btrim(q) <> ''
    ON CONFLICT (memory_id, content) DO NOTHING;
