"""I/O adapters of the pipeline: the SQL repository and the bus consumers."""
