"""Pure moderation: argument checks and decisions."""
