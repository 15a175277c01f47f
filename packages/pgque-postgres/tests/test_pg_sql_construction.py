"""SQL injection is impossible by construction, and these tests keep it so.

- No Python source of pgque hands a driver SQL text built at run time: the first argument of
  every ``execute`` is a named statement from ``shared-sql/``, a constant, or a
  ``psycopg.sql`` composition (identifiers quoted by ``sql.Identifier``). Never an f-string,
  ``%``-formatting, ``str.format`` or concatenation.
- Every value in the named statements is a bound parameter (``%(name)s``).
- The only dynamic SQL on the server (PL/pgSQL ``EXECUTE``) is in the role set-up, where every
  name goes through ``format('%I')`` or a ``reg*`` type's own quoting.
- A queue name is checked against a fixed grammar before anything else, and is a bound value.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from pgque.core import InvalidInput
from pgque.core.validation import check_queue_name
from pgque.postgres import PostgresTransport
from pgque.postgres._sql import queries, schema_files, sql_files

ROOT = Path(__file__).resolve().parents[3]
SOURCES = sorted(
    path
    for folder in [*ROOT.glob("packages/*/src"), ROOT / "conformance-tests" / "src", ROOT / "tools"]
    for path in folder.rglob("*.py")
)
DRIVER_CALLS = {"execute", "executemany", "copy", "stream", "cursor_execute"}


def _built_text(node: ast.expr) -> str | None:
    """Say how *node* builds text at run time, or None if it does not."""
    if isinstance(node, ast.JoinedStr):
        return "an f-string"
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)):
        return "% formatting or concatenation"
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        target = node.func.value
        # sql.SQL("... {} ...").format(sql.Identifier(x)) is how identifiers are composed.
        if (
            isinstance(target, ast.Call)
            and isinstance(target.func, ast.Attribute)
            and target.func.attr == "SQL"
        ):
            return None
        return "str.format"
    return None


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    assigned: dict[str, ast.expr] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                assigned[target.id] = node.value
    found: list[str] = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in DRIVER_CALLS
            and node.args
        ):
            continue
        query = node.args[0]
        # Follow one local variable: q = f"..."; cur.execute(q) is the same thing.
        if isinstance(query, ast.Name) and query.id in assigned:
            query = assigned[query.id]
        how = _built_text(query)
        if how is not None:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: SQL built with {how}")
    return found


def test_the_scan_covers_every_package() -> None:
    names = {path.relative_to(ROOT).parts[1] for path in SOURCES if path.parts[-4:-3]}
    assert {"pgque-core", "pgque-postgres", "pgque-postgres-async", "pgque-redis"} <= names


def test_the_scan_finds_what_it_forbids(tmp_path: Path) -> None:
    # The checker must be able to fail: each of these is a violation.
    bad = tmp_path / "bad.py"
    bad.write_text(
        "cur.execute(f'SELECT {x}')\n"
        "cur.execute('SELECT %s' % x)\n"
        "cur.execute('SELECT ' + x)\n"
        "cur.execute('SELECT {}'.format(x))\n"
        "q = f'DROP {t}'\n"
        "cur.execute(q)\n"
        "cur.execute(sql.SQL('SELECT {}').format(sql.Identifier(x)))\n"
        "cur.execute(queries()['publish'], params)\n"
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert len(_violations(bad)) == 5
    finally:
        ROOT = saved


def test_no_python_source_builds_sql_from_text() -> None:
    violations = [v for path in SOURCES for v in _violations(path)]
    assert violations == []


def test_named_statements_take_values_only_as_bound_parameters() -> None:
    for name, text in queries().items():
        # Only %(name)s placeholders; no {} templates, no positional %s to misalign.
        assert "{" not in text, name
        assert re.findall(r"%[^(%]", text) == [], name
        for placeholder in re.findall(r"%\((\w+)\)s", text):
            # Every value is cast to its declared type: function resolution never guesses.
            assert re.search(rf"%\({placeholder}\)s::", text), (name, placeholder)


def test_server_side_dynamic_sql_quotes_every_name() -> None:
    seen = 0
    folder = sql_files()
    texts = {f"schema/{name}": text for name, text in schema_files()}
    for entry in (folder / "migrations").iterdir():
        texts[entry.name] = entry.read_text(encoding="utf-8")
    for name, text in texts.items():
        code = re.sub(r"--[^\n]*", "", text)
        # A PL/pgSQL EXECUTE statement starts its line (GRANT/REVOKE EXECUTE do not).
        for match in re.finditer(r"^\s*EXECUTE\s+(.*?);", code, re.DOTALL | re.MULTILINE):
            statement = match.group(1).strip()
            assert statement.startswith("format("), (name, statement)
            template = re.match(r"format\('([^']*)'", statement)
            assert template is not None, (name, statement)
            # %I quotes an identifier, %L a literal; %s is only ever fed a regclass or
            # regprocedure, whose output is already a quoted, schema-qualified name.
            for spec in re.findall(r"%.", template.group(1)):
                assert spec in {"%I", "%L", "%s"}, (name, statement)
            if "%s" in template.group(1):
                assert re.search(r",\s*v_(rel|fn)\b", statement), (name, statement)
            seen += 1
    assert seen >= 14  # the role set-up, in schema/80_roles.sql and its migrations


@pytest.mark.parametrize(
    "name",
    [
        "",
        "1orders",
        "-orders",
        "orders;drop",
        "x'; DROP TABLE pgque_fifo.messages; --",
        '"quoted"',
        "{pgque:x}",
        "é",
        "a" * 65,
        "orders\x00",
        None,
        b"orders",
    ],
)
def test_a_queue_name_outside_the_grammar_never_reaches_the_database(name: object) -> None:
    with pytest.raises(InvalidInput, match="queue name"):
        check_queue_name(name)
    with pytest.raises(InvalidInput, match="queue name"):
        # A closed port: a name that slipped through would fail with ConnectionLost instead.
        PostgresTransport("postgresql://127.0.0.1:9/none", queue=name)  # type: ignore[arg-type]
