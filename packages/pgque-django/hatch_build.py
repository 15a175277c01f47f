"""The build hook of every pgque distribution that needs one (a copy sits in each package).

It does two things, both about building from a source checkout:

- ``shared-sql``: the one copy of the Postgres SQL lives in the repository's ``shared-sql/``,
  outside the package directory. An sdist carries a copy (``shared-sql/`` in the sdist); a
  wheel takes it from the checkout or, built from an sdist, from that copy, and puts it where
  the option ``shared-sql`` of ``[tool.hatch.build.hooks.custom]`` says.
- siblings: the distributions pin each other exactly (``pgque-core==0.1.0``), and until they
  are on an index a lone ``pip install packages/pgque-postgres`` could not find pgque-core.
  When pip builds a wheel from a checkout, each pinned sibling that sits in the same checkout
  is added as a direct reference to its directory (``pgque-core @ file:///...``), so pip
  builds and installs it too. Wheels built any other way (``nox -s build``, ``uv build``, from
  an sdist) carry only the exact pins, as an index requires. ``PGQUE_SIBLINGS=0`` turns it
  off, ``=1`` on.

tools/hatch_build.py is the source; the tests session checks that every copy is identical.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: A pin on a sibling distribution: ``pgque-core==0.1.0`` (maybe with a marker).
_PIN = re.compile(r"^(pgque-[a-z-]+)==([^;\s]+)\s*(?:;\s*(.*))?$")
#: The distribution name in a pyproject.toml (every pgque one spells it on one line).
_NAME = re.compile(r'^name = "([^"]+)"', re.MULTILINE)


def _checkout_root(start: Path) -> Path | None:
    """Return the repository root above *start*: the folder holding ``shared-sql/``."""
    for folder in (start, *start.parents):
        if (folder / "shared-sql").is_dir() and (folder / "packages").is_dir():
            return folder
    return None


def _siblings(root: Path) -> dict[str, Path]:
    """Return distribution name -> folder for every distribution of the checkout at *root*."""
    found: dict[str, Path] = {}
    for pyproject in [*root.glob("packages/*/pyproject.toml"), *root.glob("*/pyproject.toml")]:
        try:
            match = _NAME.search(pyproject.read_text(encoding="utf-8"))
        except OSError:
            continue
        if match is not None:
            found[match.group(1)] = pyproject.parent.resolve()
    return found


def _wanted(from_sdist: bool) -> bool:
    """Tell whether to add sibling references: pip building from a checkout, or forced."""
    forced = os.environ.get("PGQUE_SIBLINGS")
    if forced is not None:
        return forced not in {"", "0"}
    # pip marks the environment of its builds; uv and `python -m build` do not.
    return not from_sdist and "PIP_BUILD_TRACKER" in os.environ


class SiblingsHook(BuildHookInterface):  # type: ignore[type-arg]
    """Copy shared-sql into sdists and wheels; point pip at sibling folders of a checkout."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Add the SQL files and, when wanted, point pinned siblings at their folders.

        Raises RuntimeError when shared-sql/ is missing or hatchling ignores the edit.
        """
        root = Path(self.root).resolve()
        from_sdist = (root / "PKG-INFO").is_file()
        checkout = None if from_sdist else _checkout_root(root)
        target = self.config.get("shared-sql")
        if target:
            sql = checkout / "shared-sql" if checkout is not None else root / "shared-sql"
            if not sql.is_dir():
                raise RuntimeError(f"pgque build: no shared-sql/ beside or inside {root}")
            destination = "shared-sql" if self.target_name == "sdist" else str(target)
            build_data["force_include"][str(sql)] = destination
        # Editable installs are development set-ups (`-e` of every package, as nox does): a
        # direct reference there would install a second, non-editable copy of the sibling.
        wheel = self.target_name == "wheel" and version == "standard"
        if not wheel or checkout is None or not _wanted(from_sdist):
            return
        siblings = _siblings(checkout)
        core = self.metadata.core
        # Replace each pin in place, in the lists hatchling writes METADATA from: pip adds a
        # project's requirements one at a time and gives up on a pin no index can satisfy
        # before it sees a later direct reference of the same name, so an added reference
        # would not do.
        lists = [core.dependencies, *core.optional_dependencies.values()]
        for requirements in lists:
            for index, requirement in enumerate(requirements):
                match = _PIN.match(requirement.strip())
                if match is None or match.group(1) not in siblings:
                    continue
                name, _, marker = match.groups()
                reference = f"{name} @ {siblings[name].as_uri()}"
                requirements[index] = f"{reference} ; {marker}" if marker else reference
        if any(_pinned_sibling(req, siblings) for req in core.dependencies):
            raise RuntimeError("pgque build: this hatchling does not let a hook edit dependencies")


def _pinned_sibling(requirement: str, siblings: dict[str, Path]) -> bool:
    match = _PIN.match(requirement.strip())
    return match is not None and match.group(1) in siblings
