"""Client protocols besides OpenAI chat completions, each in a package of its own, served by
the same chat pipeline."""
