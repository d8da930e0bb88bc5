"""Rate limits and cooldowns: how many wake-ups one person may trigger, and how many primary turns the bot
may take in a chat, within a sliding window, with a cooldown once the window is full. The pure part (the
window arithmetic, what a wake-up counts and when it is held) lives in ``core/``; ``limiter.py`` keeps
the windows in the bus's ``rate-limits`` bucket, shared by every replica; ``settings.py`` reads a chat's
configuration into the core."""
