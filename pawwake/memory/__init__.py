"""Long-term memory: search, injection, extraction, reminders and backups."""
