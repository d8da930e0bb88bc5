"""The wake-up audit and the request log: their stores. The pure part lives in ``core/``."""
