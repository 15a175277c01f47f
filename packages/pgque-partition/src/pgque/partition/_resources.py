"""The partition layer's SQL statements and Lua scripts, read from packaged files.

The SQL lives in the repository's ``shared-sql/partition_queries.sql`` (shipped inside the
PostgreSQL wheels); the Lua scripts in this package's ``lua/`` folder. Publishing with dedup
on Redis runs the Redis transport's own ``common.lua`` first, so a deduplicated publish is the
very same append as a plain one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

from pgque.core.errors import ConfigurationError
from pgque.core.named_sql import parse_named_sql

__all__ = ["Script", "sql_queries", "lua_script"]


@dataclass(frozen=True)
class Script:
    """A Lua script's source and SHA1 (its EVALSHA handle)."""

    name: str
    text: str
    sha: str


@cache
def sql_queries() -> dict[str, str]:
    """Return the named statements of ``partition_queries.sql``.

    Raises ConfigurationError when no PostgreSQL package of pgque is installed.
    """
    try:
        from pgque.postgres_async._sql import sql_files
    except ImportError:
        try:
            from pgque.postgres._sql import sql_files
        except ImportError as exc:
            raise ConfigurationError(
                "install pgque-partition[postgres] to use it on PostgreSQL"
            ) from exc
    text = (sql_files() / "partition_queries.sql").read_text(encoding="utf-8")
    return parse_named_sql(text)


@cache
def lua_script(name: str, *, with_common: bool = False) -> Script:
    """Return the Lua script *name*, after pgque.redis's ``common.lua`` if *with_common*."""
    text = (files("pgque.partition") / "lua" / f"{name}.lua").read_text(encoding="utf-8")
    if with_common:
        common = (files("pgque.redis") / "lua" / "common.lua").read_text(encoding="utf-8")
        text = f"{common}\n{text}"
    sha = hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()
    return Script(name, text, sha)
