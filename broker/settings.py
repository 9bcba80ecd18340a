"""Configuration: one Settings object, built at the edge (create_app, CLI) and passed down."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from platformdirs import user_data_dir
from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from broker.core.allocatable import NodeOverhead

MAX_STALE_AFTER_DAYS = 36_500  # a century: any longer means "never stale"


def default_data_dir() -> Path:
    return Path(user_data_dir("placement-broker", appauthor=False))


def default_database_url() -> str:
    data = default_data_dir()
    data.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{data / 'broker.db'}"


# How a list or mapping setting is written in the environment. pydantic-settings would read them
# as JSON only and fail with a traceback naming no variable; these are decoded by the validators
# below (NoDecode), so a malformed value is a ValidationError naming the field and this form.
PATH_LIST_FORM = f"folders separated by {os.pathsep!r} (/srv/fleet{os.pathsep}/etc/broker) or a JSON list of strings"
NETWORK_LIST_FORM = "CIDRs separated by commas (10.0.0.0/8,192.168.0.0/16) or a JSON list of strings"
BUDGET_FORM = "a JSON list of [workloads, seconds] points, such as [[100,10],[3000,30]]"
WEIGHTS_FORM = 'a JSON object of tenant -> weight, such as {"team-a": 2, "team-b": 1}'


def _json(value: str, form: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        raise ValueError(f"expected {form}") from None


def _string_list(value: Any, separator: str, form: str) -> Any:
    """A JSON list, or a plain list split on `separator` (empty parts dropped); a list as is."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        items = _json(text, form)
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise ValueError(f"expected {form}")
        return items
    return [part.strip() for part in text.split(separator) if part.strip()]


PathList = Annotated[list[str], NoDecode]
NetworkList = Annotated[list[str], NoDecode]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="BROKER_", extra="ignore")

    database_url: str = ""
    # the solver's time per request (docs/operations.md, "Time a placement gets"): the request's
    # time_limit_s, else the default budget for its size, capped by how the request runs. A
    # synchronous answer must come back inside request_timeout_s; a job inside job_timeout_s.
    sync_time_limit_s: float = Field(60.0, gt=0)
    async_time_limit_s: float = Field(300.0, gt=0)
    # (workloads, seconds) points of the default budget, interpolated on log-log axes; flat
    # below the first point, the last segment's slope above the last (derived in docs/operations.md)
    default_time_budget: Annotated[list[tuple[int, float]], NoDecode] = [
        (100, 10.0),
        (300, 20.0),
        (3000, 30.0),
        (20000, 120.0),
    ]
    # before the two caps there was one for every request; set, it still caps both
    solve_time_limit_s: float | None = Field(None, gt=0)
    mip_idle_exit_s: float = 600.0  # a solver MIP child without a MIP for this long exits (docs/solver.md)
    max_workloads_sync: int = 5000
    # sized to the largest request the solver is meant to take (20,000 workloads, indented
    # JSON, with room for a running placement): measured in docs/operations.md
    max_body_bytes: int = 16_000_000
    # bounded: a date that many days back must exist (10**12 days overflowed to a 500)
    price_stale_after_days: float = Field(30.0, gt=0, le=MAX_STALE_AFTER_DAYS, allow_inf_nan=False)
    # per node, what DaemonSets request on top of the provider's reservations (docs/solver.md,
    # "Allocatable capacity"): the solver packs replicas into what is left
    node_daemonset_vcpus: float = Field(0.1, ge=0, le=1024, allow_inf_nan=False)
    node_daemonset_memory_gib: float = Field(0.25, ge=0, le=65536, allow_inf_nan=False)
    # live price feeds (docs/pricing.md): credentials come from each SDK's own chain
    azure_subscription_id: str = ""  # set: VM specs from resource SKUs (azure-identity credentials)
    gcp_project: str = ""  # set: machine types from the Compute API (application default credentials)
    pricing_timeout_s: float = 30.0
    pricing_attempts: int = 4
    # where the built in-memory catalog is cached between runs; "off" disables
    catalog_cache_dir: str = ""
    # production service (docs/operations.md)
    auth: Literal["off", "required"] = "off"  # "off" serves loopback connections only
    redis_url: str = ""  # set: async jobs go to a Redis (rq) queue run by `broker worker`
    queue_name: str = "broker"
    job_timeout_s: float = 900.0
    rate_limit: str = "1200/minute"  # per API key (limits syntax), shared via Redis when set
    request_timeout_s: float = 120.0
    idempotency_ttl_hours: float = 24.0
    fair_share_weights: Annotated[dict[str, float], NoDecode] = {}  # tenant -> weight on scarce private/edge pools
    log_format: Literal["json", "text"] = "json"
    api_key: str = ""  # the CLI's key for `--server` calls (BROKER_API_KEY)

    # dispatch to clusters (docs/dispatch.md): per API call, retried with backoff
    dispatch_timeout_s: float = 10.0
    dispatch_retries: int = 3
    dispatch_ready_wait_s: float = 0.0  # > 0: poll ready replicas up to this long after applying
    # a migration's wave waits for its new replicas to be ready before the next one starts
    # (docs/dispatch.md); the slowest documented node start-up (private, 600 s) with margin
    dispatch_wave_ready_wait_s: float = 900.0
    # who may touch what on the server (docs/dispatch.md "Credentials and isolation", docs/operations.md)
    data_dir: str = ""  # tenants' GitOps clones live under <data_dir>/workspaces; default: the user data dir
    # Fernet keys (comma separated, newest first) that encrypt stored cluster credentials; unset: refused
    secret_key: SecretStr = SecretStr("")
    secret_key_file: str = ""  # or a file holding them, one per line (a mounted Docker/Kubernetes secret)
    # roots under which the operator (CLI, or the API without a key) may name kubeconfig files and
    # GitOps work trees; empty: the home directory of the user the broker runs as and the temp dir
    server_path_roots: PathList = []
    # roots under which tenants may name file:// GitOps repositories (bare repos hosted on this
    # machine); empty: tenants may use https:// repositories only
    gitops_file_roots: PathList = []
    gitops_timeout_s: float = 60.0  # per git command (clone, fetch, push)
    # networks (CIDRs) tenants' GitOps repositories and kubeconfig API servers may resolve to although
    # not public (loopback, private, link-local, metadata); empty: public addresses only (docs/dispatch.md)
    outbound_allowed_networks: NetworkList = []

    @field_validator("server_path_roots", "gitops_file_roots", mode="before")
    @classmethod
    def _path_list(cls, v: Any) -> Any:
        return _string_list(v, os.pathsep, PATH_LIST_FORM)

    @field_validator("outbound_allowed_networks", mode="before")
    @classmethod
    def _network_list(cls, v: Any) -> Any:
        return _string_list(v, ",", NETWORK_LIST_FORM)

    @field_validator("default_time_budget", mode="before")
    @classmethod
    def _budget_json(cls, v: Any) -> Any:
        return _json(v, BUDGET_FORM) if isinstance(v, str) else v

    @field_validator("fair_share_weights", mode="before")
    @classmethod
    def _weights_json(cls, v: Any) -> Any:
        return _json(v, WEIGHTS_FORM) if isinstance(v, str) else v

    @field_validator("outbound_allowed_networks")
    @classmethod
    def _networks(cls, v: list[str]) -> list[str]:
        import ipaddress

        for net in v:
            try:
                ipaddress.ip_network(net.strip(), strict=False)
            except ValueError as exc:
                raise ValueError(f"{net!r} is not a network (CIDR such as 10.0.0.0/8, or an address)") from exc
        return v

    @field_validator("default_time_budget")
    @classmethod
    def _budget_points(cls, points: list[tuple[int, float]]) -> list[tuple[int, float]]:
        if not points:
            raise ValueError("needs at least one (workloads, seconds) point")
        for i, (n, secs) in enumerate(points):
            if n < 1 or secs <= 0:
                raise ValueError(f"point {i}: workloads must be >= 1 and seconds > 0, got ({n}, {secs})")
            if i and (n <= points[i - 1][0] or secs < points[i - 1][1]):
                raise ValueError(f"point {i}: workloads must increase and seconds must not decrease")
        return points

    @model_validator(mode="after")
    def _caps_fit_timeouts(self) -> Settings:
        # a solve that outlives the answer's own timeout is a 504 or a killed job, never an answer
        if self.sync_time_limit_s >= self.request_timeout_s:
            raise ValueError(
                f"BROKER_SYNC_TIME_LIMIT_S ({self.sync_time_limit_s:g}) must be below BROKER_REQUEST_TIMEOUT_S "
                f"({self.request_timeout_s:g}): a synchronous solve must answer before the 504"
            )
        if self.async_time_limit_s >= self.job_timeout_s:
            raise ValueError(
                f"BROKER_ASYNC_TIME_LIMIT_S ({self.async_time_limit_s:g}) must be below BROKER_JOB_TIMEOUT_S "
                f"({self.job_timeout_s:g}): rq kills a job that runs longer"
            )
        return self

    def node_overhead(self) -> NodeOverhead:
        return NodeOverhead(self.node_daemonset_vcpus, self.node_daemonset_memory_gib)

    def resolved_database_url(self) -> str:
        return self.database_url or default_database_url()

    def resolved_data_dir(self) -> Path:
        return Path(self.data_dir).expanduser().resolve() if self.data_dir else default_data_dir()

    def secret_keys(self) -> list[str]:
        """The configured Fernet keys, newest first (BROKER_SECRET_KEY, else BROKER_SECRET_KEY_FILE)."""
        raw = self.secret_key.get_secret_value()
        if not raw and self.secret_key_file:
            raw = Path(self.secret_key_file).expanduser().read_text()
        return [k.strip() for k in raw.replace(",", "\n").splitlines() if k.strip()]


# the written form of the settings whose type alone does not say how to write them
_FORMS = {
    "server_path_roots": PATH_LIST_FORM,
    "gitops_file_roots": PATH_LIST_FORM,
    "outbound_allowed_networks": NETWORK_LIST_FORM,
    "default_time_budget": BUDGET_FORM,
    "fair_share_weights": WEIGHTS_FORM,
}


def settings_problems(exc: Exception) -> list[str]:
    """One line per invalid setting, naming its BROKER_* variable and the form it expects
    (for the CLI's message; the values are not repeated: one may be a secret)."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):  # pydantic-settings' own SettingsError: it names the field
        return [f"invalid setting: {exc}"]
    lines = []
    for e in exc.errors():
        msg = str(e["msg"]).removeprefix("Value error, ")
        if not e["loc"]:  # a rule across settings: its message names them
            lines.append(f"invalid settings: {msg}")
            continue
        field = str(e["loc"][0])
        form = _FORMS.get(field)
        if form and "expected" not in msg:
            msg = f"{msg} (expected {form})"
        lines.append(f"invalid setting BROKER_{field.upper()}: {msg}")
    return list(dict.fromkeys(lines))  # a list's several bad items: said once
