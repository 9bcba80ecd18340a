"""How long a new node takes to run pods, per provider: the one source for the simulator and migrations.

Seconds from asking for a node to the node running pods (instance boot, kubelet join, image
pull), as operators typically measure them; docs/simulate.md gives the sources. The fleet
simulator delays every launched node by it; the migration scheduler delays every replica
started on a new pool by it.
"""

from __future__ import annotations

NODE_STARTUP_S = {"aws": 150.0, "gcp": 120.0, "azure": 240.0, "private": 600.0, "edge": 300.0}
DEFAULT_NODE_STARTUP_S = 240.0  # a provider we have no figure for: the slowest public cloud's


def node_startup_s(provider: str) -> float:
    return NODE_STARTUP_S.get(provider, DEFAULT_NODE_STARTUP_S)


def provider_of(site: str) -> str:
    """`aws:eu-central-1` -> `aws`; `private:fra-dc1` -> `private` (the site id's prefix)."""
    return site.split(":", 1)[0]
