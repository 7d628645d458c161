"""Anthropic's Messages API (``/v1/messages``): the same memory pipeline as chat, spoken in
Anthropic's request, event and error shapes."""
