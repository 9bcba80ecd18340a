"""constraints.txt pins every dependency pyproject.toml names, within pyproject's own range, so an
install with `-c constraints.txt` (README, .ci/run, Dockerfile) resolves what CI last passed with."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]


def _pins() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"not an exact pin: {line!r}"
            pins[canonicalize_name(name)] = Version(version)
    return pins


def _requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    listed = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    return [Requirement(r) for r in listed]


def test_every_dependency_is_pinned_within_its_range() -> None:
    pins = _pins()
    for req in _requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in constraints.txt: refresh it (docs/operations.md)"
        assert req.specifier.contains(pins[name], prereleases=True), f"{req.name}=={pins[name]} breaks {req}"


def test_every_install_reads_the_constraints() -> None:
    assert "pip install -q -c constraints.txt -e '.[dev]'" in (REPO / ".ci/run").read_text()
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "constraints.txt ./" in dockerfile and "pip install -c constraints.txt" in dockerfile
    readme = (REPO / "README.md").read_text()
    assert readme.count("pip install -c constraints.txt -e '.[dev]' && ") == 2
