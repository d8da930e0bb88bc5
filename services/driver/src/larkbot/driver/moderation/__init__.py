"""Moderation tools (ban, mute, delete). The pure part lives in ``core/``."""
