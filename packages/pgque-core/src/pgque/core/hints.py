"""The one place that words "install this" hints, so that every hint names a real command.

Every ``pip install`` pgque prints comes from :func:`install_hint` with a requirement listed in
:data:`HINTED_REQUIREMENTS`; the build session installs each of them from the built wheels with
the checkout form of the command, so a hint cannot name a distribution or an extra that does
not exist. This module imports nothing beyond the standard library (the command line uses it
before it knows that click is there).
"""

from __future__ import annotations

__all__ = ["HINTED_REQUIREMENTS", "install_hint", "pip_command"]

#: Every requirement an error message or hint of pgque may ask the user to install.
HINTED_REQUIREMENTS: tuple[str, ...] = (
    "pgque-core[cli]",
    "pgque-core[demo]",
    "pgque-core[otel]",
    "pgque-dashboard",
    "pgque-postgres",
    "pgque-postgres-async",
    "pgque-redis",
    "pgque-partition[postgres]",
    "pgque-partition[postgres-async]",
    "pgque-partition[redis]",
    "pgque-conformance[servers]",
)


def pip_command(requirement: str, *, find_links: str | None = None) -> str:
    """Return the shell command installing *requirement* (quoted when it names extras).

    Raises ValueError for a requirement outside :data:`HINTED_REQUIREMENTS`.
    """
    if requirement not in HINTED_REQUIREMENTS:
        raise ValueError(f"{requirement!r} is not in HINTED_REQUIREMENTS")
    quoted = f"'{requirement}'" if "[" in requirement else requirement
    flag = f"--find-links {find_links} " if find_links else ""
    return f"pip install {flag}{quoted}"


def install_hint(requirement: str) -> str:
    """Return the hint for *requirement*: the PyPI command, then the source-checkout one.

    Until pgque is on PyPI the second form is the one that works: the wheels that
    ``nox -s build`` leaves in ``dist/`` (docs/installation.md). Raises ValueError for a
    requirement outside :data:`HINTED_REQUIREMENTS`.
    """
    return (
        f"{pip_command(requirement)} (from a source checkout, after `nox -s build`: "
        f"{pip_command(requirement, find_links='dist')})"
    )
