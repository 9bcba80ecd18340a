"""API routers. Each feature area adds its module to ROUTER_MODULES (one per line)."""

ROUTER_MODULES: list[str] = [
    "catalog",
    "placements",
    "finops",
    "dashboard",
    "admin",
]
