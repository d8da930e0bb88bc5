"""The imperative shell of ingress-telegram: Bot API client, polling, webhook, bus, ledger, actions."""
