"""Platform budgets (docs/budgets.md): what the bot may spend on a platform, as an operator configures it
— a chat's messages per minute, the platform's API calls per UTC day and month — counted on the bus
across ingress replicas.

:mod:`.core` is the arithmetic (pure), :mod:`.store` books spends in the budget buckets with
compare-and-set and reads them back for the driver, :mod:`.metrics` exports what is left and what was
refused.
"""

__all__: list[str] = []
