"""Pure memory: records, search text, evidence, recall and the consolidation plan."""
