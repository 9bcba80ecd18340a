"""Request documents of the dispatch area, shared by the REST API and the CLI."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

DnsLabel = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")]
ReplanReason = Literal["prices", "capacity", "demand", "site_failure", "node_overload", "consolidation", "manual"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClusterIn(Strict):
    """A target cluster. Tenants send `kubeconfig_content` or `gitops_repo`; `kubeconfig` and
    `gitops_dir` are paths on the broker's machine, for its operator only (docs/dispatch.md)."""

    name: DnsLabel
    site: str = Field(min_length=1, max_length=200)
    kubeconfig_content: str | dict[str, Any] | None = Field(
        None, description="a self-contained kubeconfig (YAML or JSON text, or the object); stored encrypted"
    )
    context: str | None = Field(None, max_length=200, description="kubeconfig context (default: its current-context)")
    gitops_repo: str | None = Field(
        None, max_length=2000, description="https:// (optionally https://USER:TOKEN@...) or allowed file:// URL"
    )
    gitops_branch: str | None = Field(None, max_length=200, description="branch to commit to (default main)")
    gitops_path: str | None = Field(None, max_length=500, description="folder of the repository to write under")
    kubeconfig: str | None = Field(None, description="operator only: path of a kubeconfig file on the broker")
    gitops_dir: str | None = Field(None, description="operator only: path of a git work tree on the broker")
    namespace: DnsLabel = "default"

    @model_validator(mode="after")
    def _one_target(self) -> ClusterIn:
        targets = [self.kubeconfig_content, self.gitops_repo, self.kubeconfig, self.gitops_dir]
        if sum(t is not None for t in targets) != 1:
            raise ValueError("give exactly one of kubeconfig_content, gitops_repo, kubeconfig or gitops_dir")
        if self.context is not None and self.kubeconfig is None and self.kubeconfig_content is None:
            raise ValueError("context needs kubeconfig_content (or kubeconfig)")
        if (self.gitops_branch is not None or self.gitops_path is not None) and self.gitops_repo is None:
            raise ValueError("gitops_branch and gitops_path need gitops_repo")
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
    disruption_budget: int = Field(
        10,
        ge=1,
        le=100_000,
        description="at most this many replicas starting or stopping at once over the whole migration; "
        "also each workload's max_unavailable unless its request sets one",
    )
    migration_cost_per_replica: float = Field(0.05, ge=0, description="USD per replica moved")
    traffic_steps: list[Annotated[int, Field(ge=1, le=100)]] = Field(default_factory=lambda: [10, 50, 100])
    dry_run: bool = False

    @model_validator(mode="after")
    def _steps_rise(self) -> ReplanIn:
        s = self.traffic_steps
        if not s or s != sorted(set(s)) or s[-1] != 100:
            raise ValueError("traffic_steps must rise strictly and end at 100")
        return self
