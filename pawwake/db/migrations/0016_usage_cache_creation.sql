-- Tokens a call wrote to the provider's prompt cache (Anthropic's
-- cache_creation_input_tokens); NULL when the provider does not say.
ALTER TABLE token_usage ADD COLUMN cache_creation_tokens integer;
