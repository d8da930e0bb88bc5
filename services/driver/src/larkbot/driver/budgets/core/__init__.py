"""Pure speaking budget: when a budget is low enough to mention, and the words."""
