"""`storage.csv`: block storage list prices per provider and tier (owned sites cost nothing here)."""

from __future__ import annotations

STORAGE_SOURCE = (
    "public list price, reference region (us-east-1/eastus/us-central1), 2026; "
    "replaced by live feeds in `broker pricing refresh`"
)


def build_storage() -> list[dict[str, str]]:
    table = [
        ("aws", "standard", "0.045", "EBS st1"),
        ("aws", "ssd", "0.08", "EBS gp3"),
        ("aws", "premium", "0.125", "EBS io2"),
        ("azure", "standard", "0.045", "Standard HDD"),
        ("azure", "ssd", "0.075", "Standard SSD"),
        ("azure", "premium", "0.15", "Premium SSD"),
        ("gcp", "standard", "0.04", "pd-standard"),
        ("gcp", "ssd", "0.10", "pd-balanced"),
        ("gcp", "premium", "0.17", "pd-ssd"),
    ]
    out = [
        {"provider": p, "tier": t, "usd_per_gb_month": v, "product": prod, "source": STORAGE_SOURCE}
        for p, t, v, prod in table
    ]
    for p in ("edge", "private"):
        for t in ("standard", "ssd", "premium"):
            out.append(
                {
                    "provider": p,
                    "tier": t,
                    "usd_per_gb_month": "0",
                    "product": "owned",
                    "source": "owned hardware; cost is in the node TCO price",
                }
            )
    return out
