"""A chat's manners: how much of its conversation the bot may take (share of voice), when it keeps quiet
(quiet hours) and how it is told (talk level). The pure part lives in ``core/``; ``settings.py`` reads a
chat's configuration into it."""
