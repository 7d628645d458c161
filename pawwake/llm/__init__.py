"""Clients for upstream HTTP services: the chat provider and the embedding provider."""
