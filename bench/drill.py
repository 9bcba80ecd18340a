"""Self-healing drill: a site fails under 200+ replicas; plan and apply wall times, one per line.

    python bench/drill.py [--services 30]

Uses a fresh SQLite database (the bundled catalog loaded) and the fake Kubernetes API servers of
tests/integration/kube_fake.py; the drill itself is tests/integration/test_self_healing_drill.py.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from broker.app import Broker  # noqa: E402
from broker.settings import Settings  # noqa: E402
from tests.integration.test_self_healing_drill import drill  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--services", type=int, default=40, help="api + worker + db triples (8 replicas each)")
    ap.add_argument("--disruption-budget", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = Broker.open(Settings(database_url=f"sqlite:///{tmp}/drill.db", catalog_cache_dir="off"))
        out = drill(broker, Path(tmp), services=args.services, disruption_budget=args.disruption_budget)
    for key, value in out.items():
        print(f"drill {key} {round(value, 3) if isinstance(value, float) else value}")


if __name__ == "__main__":
    main()
