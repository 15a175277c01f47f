"""What a Redis failure is raised as: a script's refusal as its typed error, a slot on the move
as QueueMoving, a lost connection as ConnectionLost (saying whether the write may have been
applied), anything else as PgqueError."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from redis.exceptions import (
    AuthenticationError,
    BusyLoadingError,
    RedisClusterException,
    RedisError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from pgque.core.errors import (
    ConfigurationError,
    ConnectionLost,
    InvalidInput,
    PgqueError,
    QueueMoving,
    SchemaMismatch,
)
from pgque.redis._options import RedisOptions
from pgque.redis._replies import text

__all__ = [
    "script_refusal",
    "unreplicated",
    "nothing_sent",
    "connection_lost",
    "wrap_error",
    "raised_as_pgque",
]

#: What a script's refusal (``refuse`` in ``lua/lib/refusals.lua``) starts with, before its kind.
_REFUSAL_MARK = "pgque: "

#: The error each kind of script refusal is raised as.
_REFUSAL_ERRORS: Final[dict[str, type[PgqueError]]] = {
    "slot moving": QueueMoving,
    "key layout": SchemaMismatch,
    "bad input": InvalidInput,
}


def script_refusal(exc: BaseException) -> PgqueError | None:
    """Return the typed error of a script's refusal in *exc* (its message only), else None.

    Scripts refuse with ``"pgque: <kind>: <message>"`` (``lua/lib/refusals.lua``). What Redis 7
    puts after it (`` script: <sha>, ...``) and Redis 6.2 before it (``Error running script
    ...: ``) is cut off, so a refusal reads the same on every supported Redis.
    """
    message = str(exc)
    for kind, error in _REFUSAL_ERRORS.items():
        mark = f"{_REFUSAL_MARK}{kind}: "
        start = message.find(mark)
        if start >= 0:
            text = message[start + len(mark) :]
            return error(text.split(" script: ")[0])
    return None


def unreplicated(acked: object, options: RedisOptions) -> ConnectionLost | None:
    """Return the ConnectionLost to raise when ``WAIT`` answered *acked* replicas, fewer than
    ``options.wait_replicas``; else None."""
    count = int(text(acked))
    if count >= options.wait_replicas:
        return None
    return ConnectionLost(
        f"Redis at {options.masked_url} applied the write, but only {count} of "
        f"{options.wait_replicas} replica(s) confirmed it within {options.wait_timeout} s: "
        "a failover now could lose it",
        maybe_applied=True,
    )


def nothing_sent(exc: BaseException) -> bool:
    """Tell whether *exc* arose before a command reached Redis: redis-py words a failure to
    open (or re-check) a connection "... connecting to ...", and a server still loading its
    data refuses every command. Any other connection error may come after the script ran."""
    if isinstance(exc, BusyLoadingError):  # the server refused the command while loading
        return True
    message = str(exc)
    return "connecting to" in message or "Timeout connecting" in message


def connection_lost(
    exc: BaseException, masked_url: str, sent: bool, connect_timeout: float | None = None
) -> ConnectionLost:
    """Return the ConnectionLost to raise for *exc* (the caller chains it with ``from``);
    a connection never opened names the *connect_timeout* it was tried within."""
    if sent:
        return ConnectionLost(
            f"lost the connection to Redis at {masked_url} after sending a command; "
            f"a write may or may not have been applied: {exc}",
            maybe_applied=True,
        )
    if connect_timeout is not None:
        return ConnectionLost(
            f"cannot reach Redis at {masked_url} (connect timeout {connect_timeout:g} s): {exc}"
        )
    return ConnectionLost(f"cannot reach Redis at {masked_url}: {exc}")


def wrap_error(exc: BaseException, masked_url: str) -> PgqueError:
    """Return the PgqueError for a redis error *exc* that is no lost connection: a script's
    refusal typed, QueueMoving while the queue's slot moves (TRYAGAIN, or redirects that never
    settle), ConfigurationError for refused credentials, else PgqueError."""
    refusal = script_refusal(exc)
    if refusal is not None:
        return type(refusal)(f"Redis at {masked_url} refused the call: {refusal}")
    name, message = type(exc).__name__, str(exc)
    if name in {"TryAgainError", "AskError"} or "TTL exhausted" in message or "TRYAGAIN" in message:
        return QueueMoving(
            f"Redis at {masked_url} refused the call while the queue's hash slot is migrating "
            f"(TRYAGAIN); nothing was changed: retry once the slot is stable: {exc}"
        )
    if name.startswith("Authentication"):
        return ConfigurationError(f"Redis at {masked_url} refused the credentials: {exc}")
    return PgqueError(f"Redis at {masked_url} failed: {name}: {exc}")


@contextmanager
def raised_as_pgque(masked_url: str, *, sent: bool | None) -> Iterator[None]:
    """Raise a redis-py failure in the block as pgque's error: a lost connection as
    ConnectionLost (*sent*: whether a command may have reached Redis; None: as
    :func:`nothing_sent` tells), anything else as :func:`wrap_error` says."""
    try:
        yield
    except AuthenticationError as exc:
        raise wrap_error(exc, masked_url) from exc
    except (RedisConnectionError, RedisTimeoutError, RedisClusterException) as exc:
        maybe = not nothing_sent(exc) if sent is None else sent
        raise connection_lost(exc, masked_url, maybe) from exc
    except RedisError as exc:
        raise wrap_error(exc, masked_url) from exc
