-- What the memory model wrote to find a memory again: search keywords and the questions the
-- memory answers, in both Chinese and English. They are cut into the row's search_terms with
-- its content (pawwake.memory.model_terms), so an English question meets a Chinese memory;
-- kept as written so a re-index can cut them again.
ALTER TABLE memories
    ADD COLUMN model_keywords text[] NOT NULL DEFAULT '{}',
    ADD COLUMN model_questions text[] NOT NULL DEFAULT '{}';
