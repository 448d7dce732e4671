"""pyproject.toml as the Dockerfile and the dependency locks tests read it."""

from __future__ import annotations

from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]


def declared_requirements(extras: set[str], environment: dict[str, str] | None = None) -> list[Requirement]:
    """The requirements installing conveyor with ``extras`` pulls in directly: the dependencies and
    the extras' requirements, following ``conveyor[...]`` references; with ``environment`` (PEP 508
    marker variables), only those whose markers hold there."""
    requirements = [Requirement(r) for r in PROJECT["dependencies"]]
    todo, seen = sorted(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        assert extra in PROJECT["optional-dependencies"], f"pyproject.toml has no extra {extra!r}"
        for line in PROJECT["optional-dependencies"][extra]:
            req = Requirement(line)
            if canonicalize_name(req.name) == canonicalize_name(PROJECT["name"]):
                todo.extend(req.extras)
            else:
                requirements.append(req)
    if environment is None:
        return requirements
    return [r for r in requirements if r.marker is None or r.marker.evaluate({**environment, "extra": ""})]
