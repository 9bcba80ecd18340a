"""Configuration: one Settings object, built at the edge (create_app, CLI) and passed down."""

from __future__ import annotations

from pathlib import Path

from platformdirs import user_data_dir
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_database_url() -> str:
    data = Path(user_data_dir("placement-broker", appauthor=False))
    data.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{data / 'broker.db'}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="BROKER_", extra="ignore")

    database_url: str = ""
    solve_time_limit_s: float = 10.0
    max_workloads_sync: int = 5000
    max_body_bytes: int = 5_000_000
    price_stale_after_days: float = 30.0

    def resolved_database_url(self) -> str:
        return self.database_url or default_database_url()
