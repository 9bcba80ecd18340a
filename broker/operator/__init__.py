"""The broker as a Kubernetes operator: PlacementRequest and PlacementPolicy custom resources
(deploy/crds/), reconciled by a controller that solves, writes status and events, and dispatches."""
