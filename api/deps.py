"""Request-scoped access to the Broker built in create_app."""

from __future__ import annotations

from fastapi import Request

from broker.services import Broker


def get_broker(request: Request) -> Broker:
    broker: Broker = request.app.state.broker
    return broker


def get_tenant(request: Request) -> str:
    """The caller's tenant. Without authentication every caller is the "default" tenant."""
    return "default"
