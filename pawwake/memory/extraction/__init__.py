"""Learning memories from conversations: when to extract, the durable job, and reading the
model's answer."""
