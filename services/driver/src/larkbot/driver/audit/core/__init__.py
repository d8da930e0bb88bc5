"""Pure audit and request log: records and the block split of requests."""
