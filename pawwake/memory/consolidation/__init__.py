"""Organising memories into events: the draft job that asks the model for groups, reading its
answer, and merging (confirming a draft or a manual merge, reverting one)."""
