"""ASGI entry point for multi-process servers: `uvicorn api.main:app --workers N`."""

from api.app import create_app

app = create_app()
