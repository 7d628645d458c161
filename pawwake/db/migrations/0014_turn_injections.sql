-- What the gateway injected into each stored reply: memory ids with scores, reminders,
-- fragments, persona and partition summary (ids and counts only, never texts). Keyed by the
-- reply's message id, so merged or renamed sessions keep their records.

CREATE TABLE turn_injections (
    message_id  bigint PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    memory_ids  bigint[] NOT NULL DEFAULT '{}',
    record      jsonb NOT NULL
);

CREATE INDEX turn_injections_memories ON turn_injections USING gin (memory_ids);
