"""Placements: the request and answer documents, budgets, fair share and forecast-driven right-sizing."""
