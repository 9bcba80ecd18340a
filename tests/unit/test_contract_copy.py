"""docs/contract/ holds the public contract verbatim, so the docs' references to it resolve in
the repository; where the published files are at hand (beside the repository, as on the
development machines), the copies must equal them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COPIES = ROOT / "docs" / "contract"
PUBLISHED = ROOT.parent / "shared" / "spec"
FILES = ("placement-api.md", "cli-and-files.md")


@pytest.mark.parametrize("name", FILES)
def test_the_copy_is_the_published_contract(name: str) -> None:
    published = PUBLISHED / name
    if not published.exists():
        pytest.skip(f"{published} is not on this machine")
    assert (COPIES / name).read_bytes() == published.read_bytes(), f"docs/contract/{name} differs from {published}"


def test_docs_link_the_contract_inside_the_repository() -> None:
    for page in (ROOT / "docs").glob("*.md"):
        text = page.read_text()
        assert "../shared/spec" not in text, f"{page.name} points outside the repository"
        for target in re.findall(r"\]\((contract/[^)#]+)", text):
            assert (page.parent / target).exists(), f"{page.name} links {target}, which is not there"
