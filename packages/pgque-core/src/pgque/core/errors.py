"""The exceptions of pgque: one root, a few precise kinds.

Every error a transport raises through the contract is a :class:`PgqueError`; driver errors
(psycopg, redis-py) are wrapped with ``raise ... from exc`` so callers never need to import a
driver to catch a failure. A class docstring is the default message.
"""

from __future__ import annotations

__all__ = [
    "PgqueError",
    "ConfigurationError",
    "InvalidInput",
    "ConnectionLost",
    "RetryableConflict",
    "SchemaMismatch",
    "TransportClosed",
]


class PgqueError(Exception):
    """A pgque operation failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class ConfigurationError(PgqueError):
    """pgque is configured wrongly (bad URL, unknown backend, invalid option)."""


class InvalidInput(PgqueError, ValueError):
    """An argument is invalid; nothing was changed."""


class ConnectionLost(PgqueError):
    """The connection to the queue's server was lost or could not be established."""


class RetryableConflict(PgqueError):
    """The operation collided with a concurrent one (a deadlock or serialization failure) and was
    rolled back whole; nothing was changed, so running it again is safe."""


class SchemaMismatch(PgqueError):
    """The database schema is missing or of another version; run ``pgque migrate``."""


class TransportClosed(PgqueError):
    """The transport was closed; open a new one."""
