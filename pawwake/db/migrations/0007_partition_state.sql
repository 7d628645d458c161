-- Partition cache state per conversation thread: rolling summary parts and where the live
-- history (zone A) starts. Written once per rotation, in one transaction, under the thread's
-- advisory lock.
CREATE TABLE partition_state (
    thread_id text PRIMARY KEY,
    summary_parts jsonb NOT NULL DEFAULT '[]'::jsonb,
    zone_start_message_id bigint,
    rotations integer NOT NULL DEFAULT 0,
    last_summary_error text,
    summary_retry_after timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);
