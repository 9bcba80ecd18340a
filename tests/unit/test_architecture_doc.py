"""docs/architecture.md matches the tree: what it names exists, and every package has a line.

A package added without a line in the map, or a path the map names that was moved or removed,
fails here, so the map cannot drift from the house again.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PACKAGE_ROOTS = ("broker", "api", "providers", "pricing")

_BACKTICKED = re.compile(r"`([^`\s]+)`")
# a file named without its folder: resolved against the folder its table row (or sentence) is about
_BARE_FILE = re.compile(r"^[\w.-]+\.(py|md|yaml|yml|toml)$")
# a dotted module such as broker.app
_MODULE = re.compile(rf"^({'|'.join(PACKAGE_ROOTS)})(\.\w+)+$")


def _named(text: str) -> list[tuple[str, str | None]]:
    """Each backticked path or module in the doc, with the folder of the line naming it (if any)."""
    found: list[tuple[str, str | None]] = []
    for line in text.splitlines():
        tokens = _BACKTICKED.findall(line)
        folders = [t for t in tokens if "/" in t]
        base = None
        if folders:
            first = folders[0]
            base = first if first.endswith("/") else first.rsplit("/", 1)[0] + "/"
        found.extend((token, base) for token in tokens)
    return found


def _missing(token: str, base: str | None) -> bool:
    """True if `token` names a path or module that is not in the tree; False for other code names."""
    if "/" in token:
        path = ROOT / token.rstrip("/")
        return not (path.is_dir() if token.endswith("/") else path.exists())
    if _BARE_FILE.match(token):
        if base is not None and (ROOT / base / token).exists():
            return False
        # a bare name in a row about several folders: it must at least exist in one of them
        return not any(ROOT.glob(f"**/{token}"))
    if _MODULE.match(token):
        return importlib.util.find_spec(token) is None
    return False


def _packages() -> list[str]:
    """Every package in the four source trees, as `folder/`: a folder with __init__.py, or a
    namespace package (a folder of modules without one, as broker/solver/model is)."""
    return sorted(
        {
            str(module.parent.relative_to(ROOT)) + "/"
            for root in PACKAGE_ROOTS
            for module in (ROOT / root).rglob("*.py")
            if "__pycache__" not in module.parts
        }
    )


def test_every_path_the_doc_names_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    named = _named(text)
    assert len(named) > 20, "the map names almost nothing: the parser no longer reads it"
    missing = sorted({token for token, base in named if _missing(token, base)})
    assert not missing, f"docs/architecture.md names paths that are not in the tree: {missing}"


def test_every_package_has_a_line() -> None:
    named = {token for token, _ in _named(DOC.read_text(encoding="utf-8"))}
    packages = _packages()
    assert "broker/jobs/" in packages  # the walk finds packages at all
    unnamed = [package for package in packages if package not in named]
    assert not unnamed, f"packages without a line in docs/architecture.md: {unnamed}"


def test_a_new_package_or_a_removed_path_is_caught() -> None:
    """The checks fail on the drift they are for (a doc without a package, a path that is gone)."""
    named = _named("| `broker/` | x |\n| `broker/no_such_package/` | uses `no_such_file.py` |\n")
    assert _missing("broker/no_such_package/", None)
    assert _missing("no_such_file.py", "broker/no_such_package/")
    assert _missing("broker.no_such_module", None)
    assert not _missing("broker.app", None)
    assert not _missing("store.py", "broker/jobs/")
    assert {token for token, _ in named} & set(_packages()) == {"broker/"}
