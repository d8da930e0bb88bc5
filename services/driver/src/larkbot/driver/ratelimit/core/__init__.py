"""Pure rate limits: the sliding window with its cooldown (``window``) and what one wake-up asks of it
(``rates``), and the wake-up flow's part that asks it (``admission``)."""
