"""Request documents of the dispatch area, shared by the REST API and the CLI."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

DnsLabel = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")]
ReplanReason = Literal["prices", "capacity", "demand", "site_failure", "node_overload", "consolidation", "manual"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClusterIn(Strict):
    name: DnsLabel
    site: str = Field(min_length=1, max_length=200)
    kubeconfig: str | None = Field(None, description="path of a kubeconfig file readable by the broker")
    context: str | None = Field(None, description="kubeconfig context (default: its current-context)")
    gitops_dir: str | None = Field(None, description="path of a git work tree that Argo CD or Flux syncs")
    namespace: DnsLabel = "default"

    @model_validator(mode="after")
    def _one_target(self) -> ClusterIn:
        if (self.kubeconfig is None) == (self.gitops_dir is None):
            raise ValueError("give either kubeconfig (with context) or gitops_dir")
        if self.context is not None and self.kubeconfig is None:
            raise ValueError("context needs kubeconfig")
        return self


class DispatchIn(Strict):
    dry_run: bool = False
    templates: dict[str, str] = Field(
        default_factory=dict, description="workload -> manifest template (YAML, ${...} placeholders)"
    )
    images: dict[str, str] = Field(default_factory=dict, description="workload -> container image")


class ReplanIn(Strict):
    reason: ReplanReason = "manual"
    exclude_sites: list[str] = Field(default_factory=list, description="failed sites to move away from")
    replicas: dict[str, Annotated[int, Field(ge=1, le=100_000)]] = Field(
        default_factory=dict, description="new replica counts per workload (demand change)"
    )
    disruption_budget: int = Field(10, ge=1, le=100_000)
    migration_cost_per_replica: float = Field(0.05, ge=0, description="USD per replica moved")
    traffic_steps: list[Annotated[int, Field(ge=1, le=100)]] = Field(default_factory=lambda: [10, 50, 100])
    dry_run: bool = False

    @model_validator(mode="after")
    def _steps_rise(self) -> ReplanIn:
        s = self.traffic_steps
        if not s or s != sorted(set(s)) or s[-1] != 100:
            raise ValueError("traffic_steps must rise strictly and end at 100")
        return self
