-- Long-term memories (fragment 1 / event 2 / core 3), their vectors and per-session seen marks.

CREATE TABLE memories (
    id                     bigserial PRIMARY KEY,
    content                text NOT NULL CHECK (btrim(content) <> ''),
    importance             smallint NOT NULL DEFAULT 5 CHECK (importance BETWEEN 1 AND 10),
    layer                  smallint NOT NULL DEFAULT 1 CHECK (layer IN (1, 2, 3)),
    title                  text,
    is_active              boolean NOT NULL DEFAULT true,
    source_session         text,
    source_message_ids     bigint[] NOT NULL DEFAULT '{}',
    merged_from            bigint[] NOT NULL DEFAULT '{}',
    superseded_by          bigint REFERENCES memories (id) ON DELETE RESTRICT,
    event_date             date,
    remind_at              timestamptz,
    reminder_claimed_at    timestamptz,
    reminder_claim_token   text,
    reminder_delivered_at  timestamptz,
    external_id            text,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    archived_at            timestamptz,
    last_accessed          timestamptz,
    search_terms           text[] NOT NULL DEFAULT '{}'
);

CREATE UNIQUE INDEX memories_external_id ON memories (external_id) WHERE external_id IS NOT NULL;
CREATE INDEX memories_terms ON memories USING gin (search_terms);
CREATE INDEX memories_active_recent ON memories (created_at DESC) WHERE is_active;
CREATE INDEX memories_layer ON memories (layer, is_active);
CREATE INDEX memories_due_reminders ON memories (remind_at)
    WHERE remind_at IS NOT NULL AND reminder_delivered_at IS NULL AND is_active;
CREATE INDEX memories_superseded_by ON memories (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE INDEX memories_merged_from ON memories USING gin (merged_from);

-- One vector per memory, stored as real[] so the table works with or without pgvector; with
-- pgvector an HNSW expression index per dimension is created at run time.
CREATE TABLE memory_embeddings (
    memory_id   bigint PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    provider    text NOT NULL,
    model       text NOT NULL,
    dim         integer NOT NULL,
    content_sha text NOT NULL,
    embedding   real[] NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_embeddings_model ON memory_embeddings (provider, model, dim);

-- A memory injected into a session is not injected again there until its TTL passes.
CREATE TABLE memory_seen (
    session_id text NOT NULL,
    memory_id  bigint NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    seen_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, memory_id)
);
