"""The broker inside the Kubernetes tools people already run: the kube-scheduler extender, and
objects for Karmada, Open Cluster Management and Karpenter built from the broker's answers and prices."""
