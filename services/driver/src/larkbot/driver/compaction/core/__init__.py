"""Pure compaction: when to compact, what to summarize, the summary message."""
