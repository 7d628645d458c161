"""Client protocols other than OpenAI chat completions, each served by the same chat pipeline."""
