"""I/O adapters of the driver: the SQL repository, bus clients, the tool executor and the per-chat runner."""
