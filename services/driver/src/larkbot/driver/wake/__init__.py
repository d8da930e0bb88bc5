"""The wake-up flow: activation, the per-chat state and runner, the interpreter of the sans-I/O wake-up,
the bus clients and the SQL repository of turns and probes. The pure part lives in ``core/``."""
