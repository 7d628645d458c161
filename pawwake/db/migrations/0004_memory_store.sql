-- Indexes for listing, duplicate checks, cleanup and backup matching at 100k memories.

-- Listing newest first, by status and optionally by layer, with a stable tie-break on id.
CREATE INDEX memories_listing ON memories (is_active, created_at DESC, id DESC);
CREATE INDEX memories_layer_listing ON memories (layer, is_active, created_at DESC, id DESC);

-- Exact duplicates ignoring case and whitespace among active rows (check-duplicate, text
-- import). Queries compare the same expression, so both sides are normalised by PostgreSQL.
CREATE INDEX memories_active_content_key
    ON memories (md5(lower(regexp_replace(content, '\s+', '', 'g'))))
    WHERE is_active;

-- Backup import maps a row to an existing one with identical content (and layer).
CREATE INDEX memories_content_md5 ON memories (md5(content));

-- cleanup-fragments: archived fragments by the time they were archived.
CREATE INDEX memories_archived_fragments ON memories ((COALESCE(archived_at, updated_at)))
    WHERE NOT is_active AND layer = 1;
