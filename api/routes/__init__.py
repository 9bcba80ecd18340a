"""API routers, one module per feature area; api/app.py includes them (`ROUTERS`, in order)."""
