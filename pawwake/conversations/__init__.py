"""Conversation storage: turns stored exactly once (proxied and ingested alike), the spool
that keeps them while the database is away, and the stored conversations' management."""
