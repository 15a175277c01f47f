"""Load the shared SQL (``shared-sql/``, the wheel's ``sql`` folder): the fresh-install script
assembled from ``schema/`` in file-name order (``00_tables.sql`` ... ``90_version.sql``, one
file per concept), the ordered migrations and the named queries."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from pgque.core.errors import SchemaMismatch
from pgque.postgres_async.named_sql import parse_named_sql

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:
    from importlib.abc import Traversable

__all__ = [
    "Migration",
    "sql_files",
    "schema_files",
    "schema_sql",
    "migrations",
    "queries",
    "LATEST_VERSION",
]

_MIGRATION = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
#: A file of the fresh-install script: two digits (its place in the order), a name.
SCHEMA_FILE = re.compile(r"^(\d{2})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    """One ordered migration file."""

    version: int
    name: str
    sql: str


def sql_files() -> Traversable:
    """Return the folder holding ``schema/``, ``queries.sql`` and ``migrations/``; raise
    SchemaMismatch if it is missing (a broken installation)."""
    packaged = resources.files("pgque.postgres_async") / "sql"
    if packaged.is_dir():
        return packaged
    # Editable installs do not get the wheel's copy: use the repository's folder.
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared-sql"
        if (candidate / "schema").is_dir():
            return candidate
    raise SchemaMismatch("pgque's SQL files are missing from this installation; reinstall it")


@lru_cache(maxsize=1)
def schema_files() -> tuple[tuple[str, str], ...]:
    """Return the files of the fresh-install script as (name, text), in their order; raise
    SchemaMismatch if there are none, or two with one number (a broken installation)."""
    found = sorted(
        (entry.name, entry.read_text(encoding="utf-8"))
        for entry in (sql_files() / "schema").iterdir()
        if SCHEMA_FILE.match(entry.name)
    )
    numbers = [name[:2] for name, _ in found]
    if not found or len(set(numbers)) != len(numbers):
        raise SchemaMismatch(
            f"pgque's schema files are broken in this installation ({[n for n, _ in found]})"
        )
    return tuple(found)


@lru_cache(maxsize=1)
def schema_sql() -> str:
    """Return the fresh-install script of the current schema version (see
    :func:`schema_files`)."""
    return "\n".join(text for _name, text in schema_files())


@lru_cache(maxsize=1)
def migrations() -> tuple[Migration, ...]:
    """Return every migration, in version order."""
    found: list[Migration] = []
    for entry in (sql_files() / "migrations").iterdir():
        match = _MIGRATION.match(entry.name)
        if match:
            found.append(
                Migration(
                    int(match.group(1)),
                    match.group(2).replace("_", " "),
                    entry.read_text(encoding="utf-8"),
                )
            )
    found.sort(key=lambda m: m.version)
    return tuple(found)


@lru_cache(maxsize=1)
def queries() -> dict[str, str]:
    """Return the named statements (``-- name: x`` blocks) of ``queries.sql`` and of
    ``partition_queries.sql`` (the partition adapter's)."""
    files = ("queries.sql", "partition_queries.sql")
    texts = [(sql_files() / name).read_text(encoding="utf-8") for name in files]
    return {name: sql for text in texts for name, sql in parse_named_sql(text).items()}


def _latest() -> int:
    return migrations()[-1].version


LATEST_VERSION = _latest()
