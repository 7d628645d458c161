-- Vectors of one provenance by write time and by memory, carrying what the checks need, so
-- neither reads the vectors themselves: the in-process vector index finds vectors written by
-- other processes (newest first), and the backfill finds memories without a current vector.
CREATE INDEX memory_embeddings_recent
    ON memory_embeddings (provider, model, dim, created_at) INCLUDE (memory_id, content_sha);
CREATE INDEX memory_embeddings_by_memory
    ON memory_embeddings (provider, model, dim, memory_id) INCLUDE (created_at, content_sha);
