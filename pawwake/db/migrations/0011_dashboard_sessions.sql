-- Dashboard sessions ended by a logout (or a new login), so that a copied cookie stops working
-- in every gateway process. Only a hash of the session id is kept, until the cookie would have
-- expired anyway.
CREATE TABLE dashboard_revoked_sessions (
    sid_hash text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX dashboard_revoked_sessions_expires ON dashboard_revoked_sessions (expires_at);
