"""Recorded provider responses (tests/fixtures/providers/), in the providers' documented formats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "providers"


def fixture_bytes(name: str, base: str = "") -> bytes:
    """A recorded body; ``{BASE}`` (in next-page links) becomes the local server's URL."""
    return (FIXTURES / name).read_bytes().replace(b"{BASE}", base.encode())


def fixture_json(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())
