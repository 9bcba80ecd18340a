"""Imports every module that defines rows on Base, so Alembic and create_all see all tables.

Each feature area keeps its rows in its own module and adds one import here.
"""

from broker.db import (
    dispatch_models,  # noqa: F401
    finops_models,  # noqa: F401
    forecast_models,  # noqa: F401
    latency_models,  # noqa: F401
    models,  # noqa: F401
    placement_models,  # noqa: F401
    price_models,  # noqa: F401
    service_models,  # noqa: F401
    simulation_models,  # noqa: F401
)
