"""The import contracts of pyproject.toml hold on the tree, and they can fail.

``nox -s lint`` runs ``lint-imports`` on the checkout; here it also runs on a copy of the
source tree with one bad import injected, which must break exactly the contract it violates,
and tools/import_contracts.py must notice a private module that no contract lists yet.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import import_contracts
from import_contracts import ROOT

#: The source folders the contracts read, relative to the root (as noxfile.py's IMPORT_PATHS).
SOURCES = [
    *(p.relative_to(ROOT) for p in sorted(ROOT.glob("packages/*/src"))),
    Path("conformance-tests/src"),
    Path("benchmarks/src"),
    Path("chaos"),
]


def _lint_imports() -> str:
    script = Path(sys.executable).parent / "lint-imports"
    assert script.exists(), f"import-linter is not installed next to {sys.executable}"
    return str(script)


def _run(root: Path) -> subprocess.CompletedProcess[str]:
    """Run lint-imports with *root*'s pyproject.toml on *root*'s source folders."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(root / s) for s in SOURCES)}
    return subprocess.run(
        [_lint_imports(), "--no-cache", "--no-logo", "--config", str(root / "pyproject.toml")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Return a copy of the checkout's source folders and root pyproject.toml."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "tests", "results")
    for source in SOURCES:
        shutil.copytree(ROOT / source, tmp_path / source, ignore=ignore)
    for pyproject in ROOT.glob("*/pyproject.toml"):
        (tmp_path / pyproject.parent.name).mkdir(exist_ok=True)
        shutil.copy(pyproject, tmp_path / pyproject.parent.name / "pyproject.toml")
    for pyproject in ROOT.glob("packages/*/pyproject.toml"):
        shutil.copy(pyproject, tmp_path / pyproject.relative_to(ROOT))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _inject(root: Path, relative: str, line: str) -> None:
    path = root / relative
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}  # injected\n", "utf-8")


def test_the_checkout_keeps_every_contract() -> None:
    result = _run(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("relative", "line", "broken", "detail"),
    [
        (
            "packages/pgque-partition/src/pgque/partition/hashing.py",
            "from pgque.redis._arguments import now_arg",
            "pgque-redis: only pgque.redis imports its private modules BROKEN",
            "pgque.partition.hashing -> pgque.redis._arguments",
        ),
        (
            "packages/pgque-postgres/src/pgque/postgres/_cli.py",
            "from pgque.core.cli._errors import CliError",
            "pgque-core: only pgque.core imports its private modules BROKEN",
            "pgque.postgres._cli -> pgque.core.cli._errors",
        ),
        (
            "benchmarks/src/pgque_bench/_postgres.py",
            "import pgque.postgres._sql",
            "pgque-postgres: only pgque.postgres imports its private modules BROKEN",
            "pgque_bench._postgres -> pgque.postgres._sql",
        ),
        (
            "packages/pgque-core/src/pgque/core/urls.py",
            "import psycopg",
            "pgque.core imports neither psycopg nor redis BROKEN",
            "pgque.core.urls -> psycopg",
        ),
        (
            "packages/pgque-core/src/pgque/core/cli/_ops.py",
            "import redis",
            "pgque.core imports neither psycopg nor redis BROKEN",
            "pgque.core.cli._ops -> redis",
        ),
        (
            "packages/pgque-core/src/pgque/core/worker/hooks.py",
            "import pgque.sharding",
            "pgque.core imports none of the distributions built on it BROKEN",
            "pgque.core.worker.hooks -> pgque.sharding",
        ),
        (
            "packages/pgque-core/src/pgque/core/worker/_settling/decisions.py",
            "import pgque.core.worker._claiming.round_trip_async",
            "pgque.core.worker: its three parts import one way BROKEN",
            "- pgque.core.worker._settling.decisions -> ",
        ),
        (
            "packages/pgque-core/src/pgque/core/worker/_running/handlers.py",
            "from pgque.core.worker._claiming import batcher_async",
            "pgque.core.worker: its three parts import one way BROKEN",
            "- pgque.core.worker._running.handlers -> ",
        ),
    ],
    ids=[
        "partition->redis",
        "postgres->core.cli",
        "bench->postgres",
        "core->psycopg",
        "redis",
        "core->sharding",
        "worker-settling->claiming",
        "worker-running->claiming",
    ],
)
def test_an_injected_import_breaks_its_contract(
    tree: Path, relative: str, line: str, broken: str, detail: str
) -> None:
    _inject(tree, relative, line)
    result = _run(tree)
    assert result.returncode == 1, result.stdout + result.stderr
    assert broken in result.stdout
    assert detail in result.stdout
    assert "1 broken" in result.stdout  # and no other contract


def test_a_layer_importing_a_private_module_of_core_breaks_both_contracts(tree: Path) -> None:
    """A layer (PUBLIC_CORE_ONLY) reaching into core is reported by core's protected contract
    and by the layers' own one, which names it."""
    _inject(
        tree,
        "packages/pgque-sharding/src/pgque/sharding/_routing.py",
        "from pgque.core.worker._policy import Backoff",
    )
    result = _run(tree)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "pgque-core: only pgque.core imports its private modules BROKEN" in result.stdout
    assert "import only the public modules of pgque.core BROKEN" in result.stdout
    assert "pgque.sharding._routing -> pgque.core.worker._policy" in result.stdout
    assert "2 broken" in result.stdout


def test_a_private_import_inside_its_own_distribution_is_kept(tree: Path) -> None:
    _inject(
        tree,
        "packages/pgque-redis/src/pgque/redis/_keys.py",
        "from pgque.redis._arguments import now_arg",
    )
    result = _run(tree)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_new_private_module_must_be_listed(tree: Path) -> None:
    module = tree / "packages/pgque-redis/src/pgque/redis/_new_thing.py"
    module.write_text('"""A private module no contract lists yet."""\n', encoding="utf-8")
    assert import_contracts.main(["--check", "--root", str(tree)]) == 1
    assert import_contracts.main(["--root", str(tree)]) == 0
    assert import_contracts.main(["--check", "--root", str(tree)]) == 0
    assert '"pgque.redis._new_thing",' in (tree / "pyproject.toml").read_text(encoding="utf-8")
    _inject(
        tree,
        "packages/pgque-partition/src/pgque/partition/hashing.py",
        "import pgque.redis._new_thing",
    )
    result = _run(tree)
    assert "pgque.partition.hashing -> pgque.redis._new_thing" in result.stdout
    assert result.returncode == 1


def test_the_generated_block_is_current() -> None:
    assert import_contracts.main(["--check"]) == 0


def test_private_modules_are_the_outermost_underscored_ones() -> None:
    dists = {d.root: d for d in import_contracts.distributions()}
    assert set(dists) >= {
        "pgque.core",
        "pgque.postgres_async",
        "pgque.postgres",
        "pgque.redis",
        "pgque.partition",
        "pgque.conformance",
    }
    core = import_contracts.private_modules(dists["pgque.core"])
    assert "pgque.core.memory._async" in core
    assert "pgque.core.cli._errors" in core
    assert not any(name.endswith(("__main__", "__init__")) for name in core)
    assert "pgque.core.memory" not in core  # public packages are not listed
    assert "pgque.core.cli.commands" not in core
