"""Memory: the store, the memory tools and consolidation. The pure part lives in ``core/``."""
