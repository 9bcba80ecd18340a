"""The `broker` command: entry point, one module per command group, renderers and one exit-code map."""

from broker.cli.main import main

__all__ = ["main"]
