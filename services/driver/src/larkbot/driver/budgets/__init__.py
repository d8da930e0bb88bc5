"""The speaking budget: what the operator's platform budgets (``larkbot.runtime.budgets``, booked by the
ingress services) leave the bot to say in a chat, told to the probe and the primary in the late-binding
message when it runs low. The pure part lives in ``core/``; ``reader.py`` reads the budget buckets."""
