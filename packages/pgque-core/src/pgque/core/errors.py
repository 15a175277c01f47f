"""The exceptions of pgque: one root, a few precise kinds.

Every error a transport raises through the contract is a :class:`PgqueError`; driver errors
(psycopg, redis-py) are wrapped with ``raise ... from exc`` so callers never need to import a
driver to catch a failure. A class docstring is the default message.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "PgqueError",
    "ConfigurationError",
    "InvalidInput",
    "ConnectionLost",
    "QueueMoving",
    "RetryableConflict",
    "PartialFailure",
    "PartlySettled",
    "SchemaMismatch",
    "TransportClosed",
    "Unsupported",
    "LeaseLost",
]


class PgqueError(Exception):
    """A pgque operation failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class ConfigurationError(PgqueError):
    """pgque is configured wrongly (bad URL, unknown backend, invalid option)."""


class Unsupported(ConfigurationError):
    """This backend does not offer the operation (its capability flag says so)."""


class LeaseLost(PgqueError):
    """The lease is no longer the group's live lease (it expired and another holder took the
    group, or it was settled): nothing was written."""


class InvalidInput(PgqueError, ValueError):
    """An argument is invalid; nothing was changed."""


class ConnectionLost(PgqueError):
    """The connection to the queue's server was lost or could not be established."""

    def __init__(self, message: str | None = None, *, maybe_applied: bool = False) -> None:
        """Make the error; *maybe_applied* becomes :attr:`maybe_applied`.

        ``maybe_applied`` is True when the command had already been sent: the server may have
        run it, so repeating a write could apply it twice. False (the default): nothing
        reached the server, or the backend knows the write did not happen.
        """
        super().__init__(message)
        self.maybe_applied: bool = bool(maybe_applied)

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep maybe_applied across pickling (errors cross process boundaries in workers).
        return (_connection_lost, (str(self), self.maybe_applied))


def _connection_lost(message: str, maybe_applied: bool) -> ConnectionLost:
    return ConnectionLost(message, maybe_applied=maybe_applied)


class QueueMoving(ConnectionLost):
    """The node asked does not hold the whole queue now: its Redis Cluster slot is being moved
    (resharded), or the queue's data on that node was lost. Nothing was changed; the call may
    be repeated once the slot is stable again."""

    def __init__(self, message: str | None = None) -> None:
        """Make the error (never ``maybe_applied``: the server refused before any write)."""
        super().__init__(message, maybe_applied=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return (QueueMoving, (str(self),))


class PartlySettled(ConnectionLost):
    """A ``settle_and_claim`` over several shards lost one shard after the others answered:
    :attr:`settled` says, per settlement of the call, what is known: True (applied) or False
    (its lease was not held) where its shard answered, None where its shard could not be
    reached (it may or may not have been applied). Leases the call took were given back.
    Always ``maybe_applied``."""

    def __init__(self, message: str | None = None, *, settled: list[bool | None] | None = None):
        """Make the error; *settled* becomes :attr:`settled`."""
        super().__init__(message, maybe_applied=True)
        self.settled: list[bool | None] = list(settled or [])

    def __reduce__(self) -> tuple[Any, ...]:
        return (_partly_settled, (str(self), self.settled))


def _partly_settled(message: str, settled: list[bool | None]) -> PartlySettled:
    return PartlySettled(message, settled=settled)


class RetryableConflict(PgqueError):
    """The operation collided with a concurrent one (a deadlock or serialization failure) and was
    rolled back whole; nothing was changed, so running it again is safe."""


class PartialFailure(PgqueError):
    """A call over several shards failed on one shard after other shards had applied their
    part: what they did stands. :attr:`error` is the failure and :attr:`shard` the index of the
    shard that raised it. (A lost connection is raised as ``ConnectionLost`` with
    ``maybe_applied=True`` instead.)"""

    def __init__(
        self, message: str | None = None, *, shard: int = -1, error: BaseException | None = None
    ) -> None:
        """Make the error; *shard* and *error* become :attr:`shard` and :attr:`error`."""
        super().__init__(message)
        self.shard: int = shard
        self.error: BaseException | None = error

    def __reduce__(self) -> tuple[Any, ...]:
        # The cause may not pickle; its text is in the message.
        return (_partial_failure, (str(self), self.shard))


def _partial_failure(message: str, shard: int) -> PartialFailure:
    return PartialFailure(message, shard=shard)


class SchemaMismatch(PgqueError):
    """The database schema is missing or of another version; run ``pgque migrate``."""


class TransportClosed(PgqueError):
    """The transport was closed; open a new one."""
