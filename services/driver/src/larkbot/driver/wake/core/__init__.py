"""The pure wake-up: the ``wake_up`` generator, the turn protocol, the prompt, window fitting and the
estimates it rests on. No asyncio, NATS, SQL or HTTP: a function of its arguments (time is passed in)."""
