"""Turn psycopg's exceptions into pgque's, in one place, never leaking a password."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import psycopg_pool

from pgque.core.errors import (
    ConfigurationError,
    ConnectionLost,
    PgqueError,
    RetryableConflict,
    SchemaMismatch,
)

__all__ = [
    "wrap_errors",
    "is_connection_error",
    "quiet_pool_log",
    "POOL_PREFIX",
    "POOLER_HINT",
]

#: The start of the name of every pool a transport opens (``pgque-<queue>``).
POOL_PREFIX = "pgque-"
#: What psycopg_pool logs at WARNING on each failed attempt to (re)connect.
_ATTEMPT_WARNINGS = ("error connecting in %r", "reconnection attempt in pool %r")

#: SQLSTATEs that mean "the connection is gone or the server will not take it now".
_CONNECTION_STATES = {"57P01", "57P02", "57P03", "53300"}
#: SQLSTATEs that mean "the pgque schema is not there (or is older than this code)".
_SCHEMA_STATES = {"42883", "42P01", "3F000"}
#: SQLSTATEs after which the server has rolled the transaction back whole and a retry may pass:
#: deadlock_detected and serialization_failure.
_CONFLICT_STATES = {"40P01", "40001"}
#: SQLSTATEs of a server-side prepared statement that is missing or already there
#: (invalid_sql_statement_name, duplicate_prepared_statement): what psycopg's prepared
#: statements meet behind a transaction-mode pooler that does not track them.
_PREPARED_STATES = {"26000", "42P05"}
#: What to do about it (ConfigurationError's message ends with this).
POOLER_HINT = (
    "server-side prepared statements do not survive a pooler in transaction mode "
    "(PgBouncer before 1.21, or without max_prepared_statements): open the transport with "
    "prepared_statements=off (?prepared_statements=off in the URL)"
)


def is_connection_error(exc: BaseException) -> bool:
    """Tell whether *exc* means the connection failed (as opposed to a failed statement)."""
    if isinstance(exc, (psycopg.InterfaceError, psycopg_pool.PoolTimeout, psycopg_pool.PoolClosed)):
        return True
    if isinstance(exc, psycopg.OperationalError):
        state = exc.sqlstate
        return state is None or state.startswith("08") or state in _CONNECTION_STATES
    return False


class _PoolAttempts(logging.Filter):
    """Turn psycopg_pool's per-attempt warnings about pgque's own pools into DEBUG records:
    the worker already says once that the connection is lost and once that it is back."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING or not isinstance(record.msg, str):
            return True
        args = record.args
        name = args[0] if isinstance(args, tuple) and args else None
        if not isinstance(name, str) or not name.startswith(POOL_PREFIX):
            return True
        if not record.msg.startswith(_ATTEMPT_WARNINGS):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def quiet_pool_log() -> None:
    """Install :class:`_PoolAttempts` on psycopg_pool's logger (once per process)."""
    logger = logging.getLogger("psycopg.pool")
    if not any(type(f).__name__ == _PoolAttempts.__name__ for f in logger.filters):
        logger.addFilter(_PoolAttempts())


@contextmanager
def wrap_errors(what: str, secret: str | None = None) -> Iterator[None]:
    """Re-raise psycopg's errors raised in the block as pgque's, *secret* (a password)
    scrubbed: a failed connection as ConnectionLost, a missing schema SchemaMismatch, a
    deadlock or serialization failure RetryableConflict (the server rolled the transaction
    back), a prepared statement lost behind a transaction-mode pooler ConfigurationError
    (:data:`POOLER_HINT`), anything else PgqueError.
    """
    try:
        yield
    except PgqueError:
        raise
    except (psycopg.Error, psycopg_pool.PoolTimeout, psycopg_pool.PoolClosed) as exc:
        message = f"{what}: {exc}".strip()
        if secret:
            message = message.replace(secret, "***")
        if is_connection_error(exc):
            raise ConnectionLost(message) from exc
        if isinstance(exc, psycopg.Error) and exc.sqlstate in _CONFLICT_STATES:
            raise RetryableConflict(message) from exc
        if isinstance(exc, psycopg.Error) and exc.sqlstate in _SCHEMA_STATES:
            raise SchemaMismatch(
                f"{message} (is the pgque schema installed? run pgque migrate)"
            ) from exc
        if (
            isinstance(exc, psycopg.Error)
            and exc.sqlstate in _PREPARED_STATES
            and '"_pg3_' in str(exc)
        ):
            raise ConfigurationError(f"{message} ({POOLER_HINT})") from exc
        raise PgqueError(message) from exc
