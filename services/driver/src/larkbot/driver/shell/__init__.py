"""The shell tools: background tasks, their processes and store. The pure part lives in ``core/``."""
