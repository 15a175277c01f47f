"""Load the shared SQL: the schema, the ordered migrations and the named queries.

The files live in the repository's ``shared-sql/`` folder and are copied into the wheel as the
package's ``sql`` folder; an editable install reads the repository folder directly.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from pgque.core.errors import SchemaMismatch
from pgque.core.named_sql import parse_named_sql

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:
    from importlib.abc import Traversable

__all__ = ["Migration", "sql_files", "schema_sql", "migrations", "queries", "LATEST_VERSION"]

_MIGRATION = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    """One ordered migration file."""

    version: int
    name: str
    sql: str


def sql_files() -> Traversable:
    """Return the folder holding ``schema.sql``, ``queries.sql`` and ``migrations/``.

    Raises SchemaMismatch if the SQL files are missing (a broken installation).
    """
    packaged = resources.files("pgque.postgres_async") / "sql"
    if packaged.is_dir():
        return packaged
    # Editable installs do not get the wheel's copy: use the repository's folder.
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared-sql"
        if (candidate / "schema.sql").is_file():
            return candidate
    raise SchemaMismatch("pgque's SQL files are missing from this installation; reinstall it")


@lru_cache(maxsize=1)
def schema_sql() -> str:
    """Return the fresh-install script of the current schema version."""
    return (sql_files() / "schema.sql").read_text(encoding="utf-8")


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
    """Return the named statements of ``queries.sql`` (``-- name: x`` blocks)."""
    text = (sql_files() / "queries.sql").read_text(encoding="utf-8")
    return parse_named_sql(text)


def _latest() -> int:
    return migrations()[-1].version


LATEST_VERSION = _latest()
