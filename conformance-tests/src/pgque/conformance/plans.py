"""Read PostgreSQL query plans as JSON, for tests that assert a plan's shape.

Plans are read as ``EXPLAIN (FORMAT JSON)`` output, or as the JSON that ``auto_explain`` logs
for every statement a function runs (``log_format = json``), never as text: the text form
changes between server versions (PostgreSQL 18 prints ``rows=1.00`` where 17 printed
``rows=1``), the JSON keys do not.

Every plan here is one statement's ``{"Query Text": ..., "Plan": {...}}`` (EXPLAIN gives no
query text: it is the empty string there).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import pytest

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "Plan",
    "explain",
    "explaining",
    "nodes",
    "seq_scans",
    "index_scans",
    "rows_read",
    "describe",
    "analyze_as_empty",
]

#: One statement's plan: ``{"Query Text": str, "Plan": {node...}}``.
Plan = dict[str, Any]

Conn: TypeAlias = "psycopg.Connection[Any]"


def explain(
    conn: Conn, query: str, params: Sequence[object] = (), *, analyze: bool = False
) -> Plan:
    """Return the plan of *query* with *params* (``EXPLAIN (FORMAT JSON)``; with *analyze* the
    statement runs and the plan holds actual row counts and buffers)."""
    from psycopg import sql  # this module is imported without a PostgreSQL driver too

    options = "FORMAT JSON, ANALYZE, BUFFERS, TIMING OFF" if analyze else "FORMAT JSON"
    statement = sql.SQL("EXPLAIN ({}) {}").format(sql.SQL(options), sql.SQL(query))
    row = conn.execute(statement, params).fetchone()
    assert row is not None
    raw = row[0]
    document = json.loads(raw) if isinstance(raw, str) else raw
    plan = cast(Plan, document[0])
    plan.setdefault("Query Text", query)
    return plan


def explaining(conn: Conn, *, analyze: bool = False) -> list[Plan]:
    """Make every statement *conn* runs from now on, nested ones included (a function's own
    statements, in custom and generic plans alike), report its plan; return the list the
    plans land in, in the order they ran.

    Loads ``auto_explain`` into the session (a superuser's, as the tests' is); skips the test
    when the server has no contrib modules.
    """
    import psycopg  # this module is imported without a PostgreSQL driver too

    try:
        conn.execute("LOAD 'auto_explain'")
    except psycopg.Error as exc:  # pragma: no cover - a server without contrib modules
        pytest.skip(f"auto_explain is not available: {exc}")
    for setting in (
        "SET auto_explain.log_min_duration = 0",
        "SET auto_explain.log_nested_statements = on",
        "SET auto_explain.log_format = json",
        "SET auto_explain.log_analyze = on" if analyze else "SET auto_explain.log_analyze = off",
        "SET auto_explain.log_buffers = on" if analyze else "SET auto_explain.log_buffers = off",
        "SET auto_explain.log_timing = off",
        "SET auto_explain.log_level = notice",
        "SET client_min_messages = notice",
    ):
        conn.execute(setting)
    plans: list[Plan] = []

    def collect(diag: psycopg.errors.Diagnostic) -> None:
        message = diag.message_primary or ""
        start = message.find("{")
        if message.startswith("duration:") and start >= 0:
            plans.append(cast(Plan, json.loads(message[start:])))

    conn.add_notice_handler(collect)
    return plans


def nodes(plans: Plan | Iterable[Plan]) -> Iterator[dict[str, Any]]:
    """Yield every node of *plans* (one statement's plan or several), parents first."""
    for plan in [plans] if isinstance(plans, dict) else plans:
        stack = [plan["Plan"]]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.get("Plans", [])))


def seq_scans(plans: Plan | Iterable[Plan]) -> list[str]:
    """Return the relations read by a sequential scan anywhere in *plans*."""
    return [str(n.get("Relation Name")) for n in nodes(plans) if n["Node Type"] == "Seq Scan"]


def index_scans(plans: Plan | Iterable[Plan]) -> list[str]:
    """Return the indexes used by an index, index-only or bitmap index scan in *plans*."""
    return [str(n["Index Name"]) for n in nodes(plans) if "Index Name" in n]


def rows_read(plans: Plan | Iterable[Plan], index: str) -> float:
    """Return the rows a scan of *index* read in *plans* (analyzed): the rows it returned
    over all its loops, plus those its filter removed (both are given per loop)."""
    total = 0.0
    for node in nodes(plans):
        if node.get("Index Name") == index:
            loops = float(node.get("Actual Loops", 1))
            returned = float(node["Actual Rows"]) * loops
            removed = float(node.get("Rows Removed by Filter", 0)) * loops
            total += returned + removed
    return total


def describe(plans: Plan | Iterable[Plan]) -> str:
    """Return *plans* as short text for an assertion's message: each statement's query and
    node types (with their relation or index)."""
    lines: list[str] = []
    for plan in [plans] if isinstance(plans, dict) else plans:
        lines.append(" ".join(str(plan.get("Query Text", "")).split())[:200])
        for node in nodes(plan):
            target = node.get("Index Name") or node.get("Relation Name") or ""
            lines.append(f"    {node['Node Type']} {target}".rstrip())
    return "\n".join(lines)


def analyze_as_empty(conn: Conn, table: str) -> None:
    """Give *table* the statistics of an empty table, as autovacuum records them on a fresh
    database, whatever rows other tests left in it: the table is vacuumed (its empty pages at
    the end are given back), its rows are deleted in a transaction, analyzed (rows this
    transaction deleted count as dead), and the deletion rolled back; the statistics stay.
    *conn* must be in autocommit mode; *table* is ``schema.table``."""
    from psycopg import sql  # this module is imported without a PostgreSQL driver too

    name = sql.Identifier(*table.split("."))
    conn.execute(sql.SQL("VACUUM {}").format(name))
    with conn.transaction(force_rollback=True):
        conn.execute(sql.SQL("DELETE FROM {}").format(name))
        conn.execute(sql.SQL("ANALYZE {}").format(name))
    row = conn.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", (table,))
    found = row.fetchone()
    assert found is not None
    assert float(found[0]) <= 0, found
