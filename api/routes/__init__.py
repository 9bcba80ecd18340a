"""API routers. Each feature area adds its module to ROUTER_MODULES (one per line)."""

ROUTER_MODULES: list[str] = [
    "pricing",  # before "catalog": its /v1/pools/{id}/history must win over /v1/pools/{id:path}
    "sites",
    "catalog",
    "latency",
    "placements",
    "pareto",
    "finops",
    "dashboard",
    "admin",
    "dispatch",
    "usage",
    "extender",
    "integrations",
    "simulations",
]
