"""Who may call the broker: API keys, tenants, roles, and replayed answers to retried POSTs (idempotency)."""
