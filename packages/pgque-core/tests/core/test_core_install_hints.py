"""Every ``pip install`` pgque prints comes from pgque.core.hints, with a listed requirement.

The build session installs each listed requirement from the built wheels (tools/dist_check.py),
so together the two checks mean no hint names a distribution or extra that does not exist.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from pgque.core.hints import HINTED_REQUIREMENTS, install_hint, pip_command

ROOT = Path(__file__).resolve().parents[4]
#: The one module that words the hints (its docstrings and constants name pip itself).
HINTS = ROOT / "packages" / "pgque-core" / "src" / "pgque" / "core" / "hints.py"
SOURCES = sorted(
    path
    for folder in ("packages", "conformance-tests")
    for path in (ROOT / folder).glob("*/src/**/*.py")
    if path != HINTS
) + sorted((ROOT / "conformance-tests").glob("src/**/*.py"))


def _messages(tree: ast.AST) -> list[str]:
    """Return the string constants of *tree* that are not docstrings."""
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_sources_were_found() -> None:
    assert len(SOURCES) > 50


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_source_spells_out_its_own_pip_command(path: Path) -> None:
    # Messages count; docstrings are prose for developers.
    tree = ast.parse(path.read_text(encoding="utf-8"))
    spelled = [text for text in _messages(tree) if "pip install" in text]
    assert not spelled, f"use pgque.core.hints.install_hint instead: {spelled}"


def test_hints_give_the_pypi_and_the_checkout_command() -> None:
    assert install_hint("pgque-core[cli]") == (
        "pip install 'pgque-core[cli]' (from a source checkout, after `nox -s build`: "
        "pip install --find-links dist 'pgque-core[cli]')"
    )
    assert (
        pip_command("pgque-redis", find_links="dist") == "pip install --find-links dist pgque-redis"
    )


def test_an_unlisted_requirement_is_refused() -> None:
    with pytest.raises(ValueError, match="HINTED_REQUIREMENTS"):
        install_hint("pgque-mysql")


def test_every_listed_requirement_names_a_real_distribution_and_extra() -> None:
    declared: dict[str, set[str]] = {}
    for pyproject in [
        *ROOT.glob("packages/*/pyproject.toml"),
        ROOT / "conformance-tests/pyproject.toml",
    ]:
        text = pyproject.read_text(encoding="utf-8")
        name = re.search(r'^name = "([^"]+)"', text, re.M)
        assert name is not None
        extras_block = text.split("[project.optional-dependencies]", 1)
        extras = (
            set(re.findall(r"^([a-z0-9-]+) = \[", extras_block[1], re.M))
            if len(extras_block) > 1
            else set()
        )
        declared[name.group(1)] = extras
    for requirement in HINTED_REQUIREMENTS:
        distribution, _, extra = requirement.partition("[")
        assert distribution in declared, requirement
        if extra:
            assert extra.rstrip("]") in declared[distribution], requirement


def test_every_build_hook_is_a_copy_of_the_one_in_tools() -> None:
    source = (ROOT / "tools" / "hatch_build.py").read_text(encoding="utf-8")
    folders = [*ROOT.glob("packages/*/"), ROOT / "conformance-tests"]
    copies = [
        folder / "hatch_build.py" for folder in folders if (folder / "hatch_build.py").exists()
    ]
    hooked = [f for f in folders if "hooks.custom" in (f / "pyproject.toml").read_text()]
    assert len(copies) == len(hooked) >= 5
    for copy in copies:
        assert copy.read_text(encoding="utf-8") == source, f"{copy}: copy tools/hatch_build.py"
