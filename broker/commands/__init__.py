"""CLI command groups beyond the core ones in broker.cli.

Each module here defines `register(app: typer.Typer) -> None`; list it in
COMMAND_MODULES (one per line) to add its commands to `broker`.
"""

COMMAND_MODULES: list[str] = [
    "service",
    "pricing",
    "sites",
    "export",
    "finops",
    "dispatch",
    "usage",
    "forecast",
]
