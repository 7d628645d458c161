"""OpenAI's Responses API (``POST /v1/responses``, what Codex speaks) through the gateway."""
