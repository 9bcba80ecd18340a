"""Usage history and trained forecast models in the store."""
