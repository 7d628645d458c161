-- Conversation recall and sidecar ingest: turn idempotency, keyword terms, message vectors,
-- per-session seen marks of injected fragments.

-- A sidecar turn is stored once per source + session: the turn's first message carries its
-- turn_id, so a retry (even a concurrent one) finds it or collides with this index.
CREATE UNIQUE INDEX conversations_turn
    ON conversations (source, session_id, turn_id) WHERE turn_id IS NOT NULL;

-- Index terms of a message (jieba + English/number terms). NULL means "not indexed yet": the
-- catch-up indexer and the rebuild endpoint fill those rows.
ALTER TABLE conversations ADD COLUMN search_terms text[];
CREATE INDEX conversations_terms ON conversations USING gin (search_terms)
    WHERE deleted_at IS NULL;
CREATE INDEX conversations_unindexed ON conversations (id) WHERE search_terms IS NULL;
CREATE INDEX conversations_session_live ON conversations (session_id, created_at, id)
    WHERE deleted_at IS NULL;

-- One vector per message, stored as real[] so it works with or without pgvector; an edit
-- changes content_sha and makes the vector stale until the job replaces it.
CREATE TABLE conversation_embeddings (
    message_id  bigint PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
    provider    text NOT NULL,
    model       text NOT NULL,
    dim         integer NOT NULL,
    content_sha text NOT NULL,
    embedding   real[] NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX conversation_embeddings_model ON conversation_embeddings (provider, model, dim);

-- A fragment injected into a session is not injected again there until its TTL passes.
CREATE TABLE conversation_fragment_seen (
    session_id  text NOT NULL,
    fragment_id text NOT NULL,
    seen_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, fragment_id)
);
