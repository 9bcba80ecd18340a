"""Dispatch placements to Kubernetes clusters and GitOps repositories; replan and migrate safely.

Pure parts (no I/O): `manifests` (what to run where), `migration` (how to move
from one placement to another), `alerts` (Alertmanager payload -> replan
triggers). I/O parts: `kube` and `gitops` dispatchers, `outbox` (the durable
state machine), `clusters` (registry), `replan` (re-solve a stored placement).
"""
