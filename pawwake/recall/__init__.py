"""Conversation recall: past message fragments indexed per turn, searched by keywords and
vectors, ranked into fragments and injected into a chat."""
