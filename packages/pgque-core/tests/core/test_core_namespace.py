"""``pgque`` is a PEP 420 namespace shared with the PyPI distribution pgque-py.

pgque-py ships a *regular* package ``pgque/__init__.py``. Installed from wheels, its files and
ours land in the same ``site-packages/pgque/`` directory, so ``import pgque`` (theirs) and
``import pgque.core`` (ours) both work; ``nox -s build`` checks exactly that with real wheels.
Editable installs cannot: a regular package found on ``sys.path`` wins over namespace portions,
and its ``__path__`` holds only its own directory, so ``pgque.core`` in a source tree is never
searched. The tests below pin both facts down.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

import pgque.core

ROOT = Path(__file__).resolve().parents[4]
CORE_SRC = Path(pgque.core.__file__).resolve().parent


def _distributions() -> list[metadata.Distribution]:
    return [
        dist
        for dist in metadata.distributions()
        if (dist.metadata["Name"] or "").lower().startswith("pgque-")
        and (dist.metadata["Name"] or "").lower() != "pgque-py"
    ]


def test_no_source_tree_ships_a_top_level_init() -> None:
    roots = [*ROOT.glob("packages/*/src/pgque"), ROOT / "conformance-tests/src/pgque"]
    assert roots
    for root in roots:
        assert root.is_dir()
        assert not (root / "__init__.py").exists(), root


def test_no_installed_distribution_of_ours_ships_pgque_init() -> None:
    ours = _distributions()
    assert any(d.metadata["Name"] == "pgque-core" for d in ours)
    for dist in ours:
        files = [str(f).replace("\\", "/") for f in dist.files or []]
        assert "pgque/__init__.py" not in files, dist.metadata["Name"]


def test_pgque_is_a_namespace_here() -> None:
    import pgque

    if getattr(pgque, "__file__", None) is not None:
        pytest.skip("a regular pgque package (pgque-py) is installed in this environment")
    assert len(list(pgque.__path__)) >= 1


def _run(code: str, *path: Path) -> subprocess.CompletedProcess[str]:
    prelude = f"import sys; sys.path[:0] = {[str(p) for p in path]!r}\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _stub_regular_pgque(folder: Path) -> Path:
    """Lay out a regular ``pgque`` package the way pgque-py installs it."""
    package = folder / "pgque"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""Stand-in for pgque-py."""\nCLIENT = "pgque-py"\n')
    return package


def test_wheel_layout_lets_both_import(tmp_path: Path) -> None:
    package = _stub_regular_pgque(tmp_path / "site")
    shutil.copytree(CORE_SRC, package / "core")
    result = _run(
        """
        import pgque, pgque.core
        assert pgque.CLIENT == "pgque-py"
        assert pgque.core.Event(kind="k").kind == "k"
        print(pgque.core.__file__)
        """,
        tmp_path / "site",
    )
    assert result.returncode == 0, result.stderr
    assert str(tmp_path / "site") in result.stdout


def test_editable_layout_is_hidden_by_a_regular_package(tmp_path: Path) -> None:
    _stub_regular_pgque(tmp_path / "site")
    result = _run("import pgque.core", tmp_path / "site", CORE_SRC.parent.parent)
    assert result.returncode != 0
    assert "No module named 'pgque.core'" in result.stderr


# The real pgque-py beside real wheels is checked by `nox -s build` (tools/smoke.py): editable
# installs, which this session uses, cannot coexist with it (see the test above).
