"""The catalog in the store: sites and pools, their prices and history, live refreshes, private and edge sites."""
