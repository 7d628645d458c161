-- Settings saved from the dashboard, conversations and token usage.

CREATE TABLE runtime_flags (
    name       text PRIMARY KEY,
    value      jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE gateway_config (
    key        text PRIMARY KEY,
    value      jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE conversations (
    id          bigserial PRIMARY KEY,
    session_id  text NOT NULL,
    role        text NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content     text NOT NULL DEFAULT '',
    model       text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    metadata    jsonb NOT NULL DEFAULT '{}'::jsonb,
    deleted_at  timestamptz,
    source      text NOT NULL DEFAULT 'gateway',
    turn_id     text
);
CREATE INDEX conversations_session_order ON conversations (session_id, created_at, id);
CREATE INDEX conversations_recent ON conversations (created_at DESC);

CREATE TABLE token_usage (
    id                bigserial PRIMARY KEY,
    session_id        text,
    model             text,
    prompt_tokens     integer NOT NULL DEFAULT 0,
    completion_tokens integer NOT NULL DEFAULT 0,
    total_tokens      integer NOT NULL DEFAULT 0,
    cached_tokens     integer,
    usage_type        text NOT NULL DEFAULT 'chat'
                      CHECK (usage_type IN ('chat', 'summary', 'extract', 'consolidate', 'embed')),
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX token_usage_session ON token_usage (session_id, created_at);
CREATE INDEX token_usage_day ON token_usage (created_at);
