"""Compaction of a chat's history into a summary. The pure part lives in ``core/``."""
