-- Message vectors of one provenance by write time and by message, carrying what the checks
-- need, so neither reads the vectors themselves: conversation recall's in-process vector index
-- finds vectors written by other processes (newest first) and notices deletions by a count.
CREATE INDEX conversation_embeddings_recent
    ON conversation_embeddings (provider, model, dim, created_at) INCLUDE (message_id, content_sha);
CREATE INDEX conversation_embeddings_by_message
    ON conversation_embeddings (provider, model, dim, message_id) INCLUDE (created_at, content_sha);
