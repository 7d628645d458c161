-- Failed dashboard sign-ins, shared by every gateway process, so a guesser behind a load
-- balancer gets one budget, not one per replica. Keys are hashes of the client's address or
-- known-browser id; rows older than the throttle's window are cleared as new ones arrive.
CREATE TABLE dashboard_login_failures (
    client_hash text NOT NULL,
    failed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dashboard_login_failures_client ON dashboard_login_failures (client_hash, failed_at);
CREATE INDEX dashboard_login_failures_at ON dashboard_login_failures (failed_at);

-- While many addresses guess at once, sign-ins without a known browser pass one at a time:
-- the next moment one may pass, for the whole fleet.
CREATE TABLE dashboard_login_gate (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    next_open timestamptz NOT NULL
);
