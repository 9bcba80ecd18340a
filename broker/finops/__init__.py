"""FinOps outputs: the savings ledger, FOCUS cost rows and the dashboard's aggregates."""
