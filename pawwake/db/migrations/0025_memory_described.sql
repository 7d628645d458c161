-- When the memory model last described a memory (wrote its keywords and questions, or was
-- asked and wrote nothing usable). NULL: not yet, so the describe job still owes it; rows the
-- model already wrote terms for count as described.
ALTER TABLE memories ADD COLUMN described_at timestamptz;
UPDATE memories SET described_at = now()
    WHERE model_keywords <> '{}' OR model_questions <> '{}';
CREATE INDEX memories_undescribed ON memories (id) WHERE described_at IS NULL;
