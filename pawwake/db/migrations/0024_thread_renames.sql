-- Where a renamed thread went. A reply still streaming when its thread was renamed is stored
-- after the rename moved the thread's rows: its store follows the rename (when the turn began
-- before ``renamed_at``) instead of leaving a ghost thread under the old id.
CREATE TABLE thread_renames (
    old_id text PRIMARY KEY,
    new_id text NOT NULL,
    renamed_at timestamptz NOT NULL DEFAULT now()
);
