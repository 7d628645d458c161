"""The chat request flow: persona, context, forwarding and what happens after a reply."""
