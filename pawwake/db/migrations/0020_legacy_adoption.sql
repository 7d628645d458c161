-- Adopting a Pawwake 4.x database in place (pawwake/upgrade/adopt.py). The 4.x tables are kept
-- in the schema pawwake4; this records how far their copy into ours has come, so that a
-- start after an interruption (even kill -9) finishes it, and a finished one is never redone.
-- A fresh install has no rows here.
CREATE TABLE legacy_adoption (
    id          boolean PRIMARY KEY DEFAULT true CHECK (id),  -- at most one adoption
    version     text NOT NULL,              -- 4.0.x or 4.1.x, as recognised
    survey      jsonb NOT NULL DEFAULT '{}'::jsonb,  -- what the source held, before copying
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);

-- One row per step; a batched step keeps the last source id it copied in ``position``.
CREATE TABLE legacy_adoption_steps (
    step       text PRIMARY KEY,
    position   bigint NOT NULL DEFAULT 0,
    counts     jsonb NOT NULL DEFAULT '{}'::jsonb,
    done_at    timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);
