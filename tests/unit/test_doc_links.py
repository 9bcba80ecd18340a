"""Every relative link of the README, docs/*.md and bench/RESULTS.md lands: the file exists and,
where the link names a section (`page.md#anchor`), the page has a heading of that anchor.

Pages are split and sections renamed (docs/solver.md became a guide with reference pages beside
it); a link left pointing at the old place fails here instead of in a reader's browser.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "RESULTS.md")

_LINK = re.compile(r"\]\(([^)\s#]*)(#[^)\s]+)?\)")
_HEADING = re.compile(r"^#{1,6} (.+?)\s*$", re.M)
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def broken_links(page: Path) -> list[str]:
    """The links of `page` whose file or section is not there."""
    broken = []
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    for match in _LINK.finditer(text):
        target, section = match.group(1), match.group(2)
        if target.startswith(("http://", "https://", "mailto:")) or not (target or section):
            continue
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            broken.append(f"{target} (no such file)")
        elif section and path.suffix == ".md":
            headings = {anchor(h) for h in _HEADING.findall(_FENCE.sub("", path.read_text(encoding="utf-8")))}
            if section[1:] not in headings:
                broken.append(f"{target}{section} (no such section)")
    return broken


def test_every_link_lands() -> None:
    broken = {page.relative_to(ROOT).as_posix(): links for page in PAGES if (links := broken_links(page))}
    assert not broken, f"links to files or sections that are not there: {broken}"


def test_a_link_to_a_missing_section_or_file_is_caught(tmp_path: Path) -> None:
    (tmp_path / "guide.md").write_text("# Guide\n\n## Work limits: the same answer on any machine\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](guide.md#work-limits-the-same-answer-on-any-machine) [gone](guide.md#instance-requirements)\n"
        "[nofile](other.md) [here](#page) [web](https://example.com/x.md#y)\n\n# Page\n"
    )
    assert broken_links(page) == ["guide.md#instance-requirements (no such section)", "other.md (no such file)"]
