"""Pure rate limits: the sliding window with its cooldown (``window``) and what one wake-up asks of it
(``rates``)."""
