-- The price of a call when the provider reports it (OpenRouter: usage.cost); NULL when unknown,
-- so an unknown price is never summed as zero. Chart and CSV read token_usage by local day.
ALTER TABLE token_usage ADD COLUMN cost numeric(14, 8);
