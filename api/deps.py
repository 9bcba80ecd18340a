"""Request-scoped access to the Broker built in create_app."""

from __future__ import annotations

from fastapi import Request

from broker.access.keys import Principal
from broker.app import Broker


def get_broker(request: Request) -> Broker:
    broker: Broker = request.app.state.broker
    return broker


def get_tenant(request: Request) -> str:
    """The caller's tenant, from the API key (`Authorization: Bearer KEY`) that api.auth verified.

    With BROKER_AUTH=off and no key every (loopback) caller is the "default" tenant. Every
    route that reads or writes tenant data takes `tenant: Annotated[str, Depends(get_tenant)]`.
    """
    from api.auth import principal_of

    return principal_of(request.scope).tenant


def get_principal(request: Request) -> Principal:
    """The caller's key (tenant, role, key id); the local principal when authentication is off."""
    from api.auth import principal_of

    return principal_of(request.scope)
