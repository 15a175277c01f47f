"""The asyncio PostgreSQL transport: one server-side function call per operation."""

# This file is the source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit

import psycopg
import psycopg_pool
from psycopg import AsyncConnection, sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

from pgque.core.contract import ErrorLike
from pgque.core.errors import ConnectionLost, InvalidInput, PgqueError, TransportClosed
from pgque.core.models import (
    Capabilities,
    DeadLetter,
    ErrorInfo,
    Event,
    GroupInfo,
    GroupStateName,
    Lease,
    QueueStats,
    ScheduledMessage,
    Settlement,
    SettleResult,
)
from pgque.core.tracing import traced_publish
from pgque.core.transport_base import TransportBase
from pgque.core.validation import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_EVENT_BYTES,
    MAX_REASON_CHARS,
    OnExhausted,
    TransportOptions,
    check_after_id,
    check_backend,
    check_batch_size,
    check_claim_count,
    check_delay,
    check_entry_name,
    check_error,
    check_group_id,
    check_groups_page,
    check_head,
    check_holder,
    check_holders,
    check_ids,
    check_lease,
    check_limit,
    check_message_id,
    check_oldest_groups,
    check_priority,
    check_reason,
    check_scheduled_page,
    check_seconds,
    check_settlements,
    check_store,
    check_tick,
)
from pgque.core.wakeups import AsyncWakeupWaiter
from pgque.postgres_async._errors import (
    POOL_PREFIX,
    is_connection_error,
    mask_dsn,
    quiet_pool_log,
    wrap_errors,
)
from pgque.postgres_async._schema import check_schema, install_schema
from pgque.postgres_async._sql import queries

# sync: import threading

__all__ = ["AsyncPostgresTransport", "ORIGIN"]

#: How ``Lease.origin`` of every lease this transport issues starts; the rest names its store:
#: ``postgresql:<system identifier>/<database>`` (a lease of another store is refused).
ORIGIN = "postgresql"

_CAPABILITIES = Capabilities(
    injected_clock=True,
    priorities=True,
    dead_letters=True,
    transactional_publish=True,
    durable=True,
    wakeups=True,  # LISTEN/NOTIFY
    purge=True,
    queues=True,
    scheduling=True,
)

#: The shortest idle wait while a scheduled message is due but has not joined its group yet
#: (a publish holding the group's lock lets it in; a claim then sees it): no busy loop.
_DUE_WAIT_FLOOR_S = 0.02
#: While due messages stay unjoined (their group's lock is held: a claim skips them) the idle
#: wait doubles from the floor up to this; the holder's commit notifies, ending it at once.
_DUE_WAIT_BACKOFF_MAX_S = 1.0

#: SQLSTATEs after which retrying the connection cannot help (bad password, no database).
_FATAL_CONNECT_STATES = {"28000", "28P01", "3D000", "42704"}
#: The server refusals that go away by themselves: worth retrying until the timeout.
_TRANSIENT_REFUSALS = (
    "starting up",
    "shutting down",
    "not yet accepting connections",
    "recovery mode",
    "too many clients",
    "connection slots",
)


#: How libpq words "nothing listens there": a TCP port that refuses, a socket file that is gone.
_REFUSED = ("Connection refused", "No such file or directory")


#: The connect timeout when none is given (``connect_timeout``, alias ``timeout``), seconds.
DEFAULT_CONNECT_TIMEOUT = 10.0


def _connect_timeout(timeout: float | None, connect_timeout: float | None) -> float:
    """Return the connect timeout of ``timeout`` and ``connect_timeout`` (two names of one
    option: both given must agree), else :data:`DEFAULT_CONNECT_TIMEOUT`; checked."""
    if timeout is not None and connect_timeout is not None and timeout != connect_timeout:
        raise InvalidInput(
            f"timeout ({timeout!r}) and connect_timeout ({connect_timeout!r}) name the same "
            "option: give one"
        )
    chosen = connect_timeout if connect_timeout is not None else timeout
    if chosen is None:
        return DEFAULT_CONNECT_TIMEOUT
    return check_seconds(chosen, "connect_timeout")


async def _connect_within(dsn: str, seconds: float) -> AsyncConnection[Any]:
    """Open an autocommit connection to *dsn*, giving up after about *seconds*.

    libpq's connect_timeout is whole seconds (2 at least) per address tried: the asyncio side
    also bounds the attempt as a whole; the blocking side has only libpq's (a connect timeout
    under 2 s then takes 2 s). A timeout raises psycopg's OperationalError, as libpq's does.
    """
    kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": max(2, math.ceil(seconds))}
    opening = AsyncConnection.connect(dsn, **kwargs)  # async-only
    try:  # async-only
        return await asyncio.wait_for(opening, max(seconds, 0.01))  # async-only
    # (asyncio.TimeoutError: TimeoutError itself only from Python 3.11)  # async-only
    except asyncio.TimeoutError:  # async-only
        raise psycopg.OperationalError("connection timeout expired") from None  # async-only
    # sync: return Connection.connect(dsn, **kwargs)


#: How long the pool keeps trying to reconnect one connection before it starts over. Its
#: pause between two attempts doubles from 1 s until this (psycopg_pool's own default is 5
#: minutes: a server back after a long outage could wait a minute for the next attempt);
#: starting over keeps the pause at 2 s at most, for an outage of any length.
POOL_RECONNECT_S = 5.0


async def _reconnect_again(pool: AsyncConnectionPool[Any]) -> None:
    """The pool gave up a reconnection (after POOL_RECONNECT_S): start a new one at once."""
    if pool.closed:
        return
    # check() grows an empty pool again; a pool closed meanwhile refuses, which is fine.
    with contextlib.suppress(psycopg_pool.PoolClosed, psycopg.Error):
        await pool.check()


#: The kind of the stand-in event ``dead_letters`` shows for stored text that is not Event JSON.
UNDECODABLE_KIND = "pgque.undecodable"
#: The start of a dead letter's reason when claim found its event text undecodable.
UNDECODABLE_REASON = "undecodable event"
#: How much of an undecodable event's text the stand-in event carries.
_UNDECODABLE_SHOWN = 4096


def _stand_in(text: str, exc: Exception) -> Event:
    """Return the event ``dead_letters`` shows for stored text that is not Event JSON."""
    return Event(
        kind=UNDECODABLE_KIND,
        data={"text": text[:_UNDECODABLE_SHOWN], "error": str(exc)[:MAX_REASON_CHARS]},
    )


def _error_info(text: str | None) -> ErrorInfo | None:
    """Decode a stored ErrorInfo; text that is not one (written by hand) is shown as a record
    of type ``pgque.undecodable`` whose message is the text."""
    if text is None:
        return None
    try:
        return ErrorInfo.from_json(text)
    except Exception:  # InvalidInput, and RecursionError on deeply nested text
        return ErrorInfo(type=UNDECODABLE_KIND, message=text, at=0.0).bounded()


def _group_info(row: Sequence[Any]) -> GroupInfo:
    """Build a GroupInfo from a row of pgque_group_v1 / pgque_groups_v1."""
    (
        group_id,
        state,
        depth,
        priority,
        head_id,
        head_at,
        head_attempts,
        lease_expires_at,
        lease_holder,
        resume_at,
        last_error,
    ) = row
    return GroupInfo(
        group_id=group_id,
        state=state,
        depth=depth,
        priority=priority,
        head_message_id=head_id,
        head_enqueued_at=head_at,
        head_attempts=head_attempts,
        lease_expires_at=lease_expires_at,
        lease_holder=lease_holder,
        resume_at=resume_at,
        last_error=_error_info(last_error),
    )


#: Client-side TLS failures: the server's certificate will not change between attempts.
_TLS_FAILURES = ("certificate verify failed", "server certificate", "root certificate file")


def _retryable(exc: psycopg.Error, *, retry_refused: bool = True) -> bool:
    """Tell whether connecting again may succeed (the server is down or starting).

    With *retry_refused* False a refused connection (no server listening) is final: only a
    server that answers and says it is starting or busy is worth waiting for.
    """
    if not is_connection_error(exc) or exc.sqlstate in _FATAL_CONNECT_STATES:
        return False
    text = str(exc)
    if not retry_refused and any(refused in text for refused in _REFUSED):
        return False
    if any(failure in text for failure in _TLS_FAILURES):
        return False
    # A FATAL refusal (bad password, unknown database or setting) will not change on retry.
    return "FATAL:" not in text or any(refusal in text for refusal in _TRANSIENT_REFUSALS)


def _check_listen_url(url: object) -> str | None:
    """Return *url* if it is a libpq connection string (or None); raise InvalidInput if not."""
    if url is None:
        return None
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput(f"listen_url must be a postgresql:// URL, not {url!r}")
    try:
        conninfo_to_dict(url)
    except psycopg.Error as exc:
        secret = _password(url)
        detail = str(exc).replace(secret, "***") if secret else str(exc)
        raise InvalidInput(
            f"listen_url {mask_dsn(url)!r} is not a libpq connection string ({detail}); give "
            "the direct server's postgresql:// URL (percent-encoded inside a queue URL)"
        ) from None
    return url


def _password(dsn: str) -> str | None:
    """Return the password written in a URL DSN, to scrub it from error messages."""
    if "://" not in dsn:
        return None
    try:
        password = urlsplit(dsn).password
    except ValueError:
        return None
    return unquote(password) if password else None


class AsyncPostgresTransport(TransportBase):
    """A per-group FIFO queue in PostgreSQL (asyncio API).

    *source* is a DSN (the transport opens its own pool of autocommit connections on first use
    or when entered as a context manager; see :meth:`from_dsn` to open it eagerly with
    retries), an ``AsyncConnectionPool`` or an ``AsyncConnection`` you own (the transport never
    closes those). *max_event_bytes* caps one event's JSON text (default 8 MiB); a larger publish is
    refused with InvalidInput before any I/O. With ``setup=True`` the schema is installed or
    migrated on open; otherwise a missing or old schema raises SchemaMismatch. Every operation
    is one call of a server-side function, one round trip, judged by the server's clock unless
    *clock* is given (tests). Opening a DSN gives up with ConnectionLost after the connect
    timeout, *connect_timeout* (alias *timeout*; default 10 s), retrying until then a server
    that is down or starting, whatever the failure (refused, unreachable, a server that never
    answers); with ``retry_refused=False`` a refused connection (nothing listens) fails at once
    and only a server that answers "starting up" is waited for (one-shot tools). The timeout
    bounds opening only: once open, a lost connection is reconnected by the pool.

    Behind a pooler in transaction mode (PgBouncer before 1.21, which cannot keep a client's
    prepared statements), open it with ``prepared_statements=False``: no statement is prepared
    on the server. *listen_url* is the libpq connection string (a ``postgresql://`` URL) of
    the connection :meth:`wait_for_messages` LISTENs on, default the transport's own source;
    behind a transaction-mode pooler give it the server's direct address, since a LISTEN
    through such a pooler is never heard (docs/postgres.md, "Behind PgBouncer").

    Raises InvalidInput for invalid options.
    """

    CAPABILITIES = _CAPABILITIES

    def __init__(
        self,
        source: str | AsyncConnection[Any] | AsyncConnectionPool[Any],
        *,
        queue: str = "default",
        max_attempts: int | None = DEFAULT_MAX_ATTEMPTS,
        on_exhausted: OnExhausted = "dead_letter",
        clock: Callable[[], float] | None = None,
        setup: bool = True,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        retry_refused: bool = True,
        prepared_statements: bool = True,
        listen_url: str | None = None,
        connect_timeout: float | None = None,
    ) -> None:
        self._options = TransportOptions(
            queue=queue,
            max_attempts=max_attempts,
            on_exhausted=on_exhausted,
            clock=clock,
            max_event_bytes=max_event_bytes,
        )
        TransportBase.__init__(self, self._options)
        if isinstance(min_size, bool) or not isinstance(min_size, int) or min_size < 0:
            raise InvalidInput(f"min_size must be an int >= 0, not {min_size!r}")
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise InvalidInput(f"max_size must be an int >= 1, not {max_size!r}")
        if max_size < min_size:
            raise InvalidInput(f"max_size ({max_size}) must be >= min_size ({min_size})")
        self._timeout = _connect_timeout(timeout, connect_timeout)
        self._retry_refused = bool(retry_refused)
        if not isinstance(prepared_statements, bool):
            raise InvalidInput(f"prepared_statements must be a bool, not {prepared_statements!r}")
        # execute(prepare=False) never prepares; None leaves it to psycopg (after 5 runs).
        self._prepare: bool | None = None if prepared_statements else False
        self._listen_url = _check_listen_url(listen_url)
        self._setup = bool(setup)
        self._min_size = min_size
        self._max_size = max_size
        self._dsn: str | None = None
        self._pool: AsyncConnectionPool[Any] | None = None
        self._conn: AsyncConnection[Any] | None = None
        self._own_pool = False
        if isinstance(source, str):
            self._dsn = source
            self._own_pool = True
        elif isinstance(source, AsyncConnectionPool):
            self._pool = source
        elif isinstance(source, AsyncConnection):
            self._conn = source
        else:
            raise InvalidInput(
                "source must be a DSN, an AsyncConnection or an AsyncConnectionPool, "
                f"not {type(source).__name__}"
            )
        self._secret = _password(self._dsn) if self._dsn else None
        self._ready = False
        #: ``Lease.origin`` of this store's leases, learnt when the transport opens
        self._origin = ""
        self._open_lock = asyncio.Lock()
        # The LISTEN side of wait_for_messages: one dedicated connection, opened on first use;
        # the shared waiter lets one caller read it at a time and releases the others.
        self._listen_conn: AsyncConnection[Any] | None = None
        # The idle wait's cap while due messages stay unjoined (see wait_for_messages).
        self._due_backoff = _DUE_WAIT_FLOOR_S
        self._wakeups = AsyncWakeupWaiter(
            listening=lambda: self._listen_conn is not None,
            listen=self._start_listening,
            heard=self._notified,
            drain=self._drain_notifies,
            reset=self._drop_listener,
        )

    @classmethod
    async def from_dsn(
        cls, dsn: str, *, timeout: float | None = None, **options: Any
    ) -> AsyncPostgresTransport:
        """Open a transport on *dsn*, retrying while the server starts, for up to the connect
        timeout (*timeout* or ``connect_timeout``, default 10 s).

        *options* are those of the constructor. Raises ConnectionLost if the server cannot be
        reached in time, SchemaMismatch if the schema is missing and ``setup=False``.
        """
        transport = cls(dsn, timeout=timeout, **options)
        try:
            await transport.open()
        except BaseException:
            await transport.close()
            raise
        return transport

    def _repr_fields(self) -> list[str]:
        where = mask_dsn(self._dsn) if self._dsn else "injected"
        return [f"queue={self.queue!r}", f"source={where!r}"]

    @property
    def max_attempts(self) -> int | None:
        """Deliveries a head gets before ``on_exhausted`` applies; None means unlimited."""
        return self._options.max_attempts

    @property
    def on_exhausted(self) -> OnExhausted:
        """What happens to a head that used up ``max_attempts``: dead_letter or block."""
        return self._options.on_exhausted

    # -- connections ---------------------------------------------------------------------

    async def open(self) -> None:
        """Connect (retrying a DSN until the timeout) and install or check the schema.

        Called implicitly by the first operation; idempotent. Raises ConnectionLost,
        SchemaMismatch or TransportClosed.
        """
        if self._closed:
            raise TransportClosed()
        if self._ready:
            return
        async with self._open_lock:
            # Another caller may have opened it while we waited for the lock.
            if not self._ready:
                await self._connect()
                self._ready = True

    async def _connect(self) -> None:
        if self._dsn is not None:
            await self._open_dsn(self._dsn)
        elif self._pool is not None:
            with wrap_errors("opening the pgque transport"):
                async with self._pool.connection() as conn:
                    await self._ready_schema(conn)
        elif self._conn is not None:
            await self._ready_schema(self._conn)

    async def _ready_schema(self, conn: AsyncConnection[Any]) -> None:
        if self._setup:
            await install_schema(conn)
        else:
            await check_schema(conn)
        cursor = await conn.execute(queries()["store_identity"], prepare=False)
        row = await cursor.fetchone()
        if row is None:  # pragma: no cover - pg_control_system() always has its row
            raise PgqueError("the server did not say which database this is")
        self._origin = f"{ORIGIN}:{row[0]}"

    async def _open_dsn(self, dsn: str) -> None:
        deadline = time.monotonic() + self._timeout
        delay = 0.1
        while True:
            remaining = deadline - time.monotonic()
            try:
                conn = await _connect_within(dsn, remaining)
                try:
                    await self._ready_schema(conn)
                finally:
                    await conn.close()
                break
            except (psycopg.Error, ConnectionLost) as exc:
                # A connection lost while the schema is checked (a restart, a failover, a cut)
                # is as passing as a refused one; installing again is idempotent.
                retry = isinstance(exc, ConnectionLost) or _retryable(
                    exc, retry_refused=self._retry_refused
                )
                if isinstance(exc, ConnectionLost) and time.monotonic() + delay > deadline:
                    raise
                if not retry or time.monotonic() + delay > deadline:
                    message = f"could not connect to {mask_dsn(dsn)}"
                    if retry:
                        message += f" within {self._timeout:g} s"
                    with wrap_errors(message, self._secret):
                        raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            dsn,
            min_size=self._min_size,
            max_size=self._max_size,
            kwargs={"autocommit": True},
            open=False,
            timeout=self._timeout,
            name=f"{POOL_PREFIX}{self.queue}",
            reconnect_timeout=POOL_RECONNECT_S,
            reconnect_failed=_reconnect_again,
        )
        quiet_pool_log()
        with wrap_errors(f"could not open a pool on {mask_dsn(dsn)}", self._secret):
            await pool.open(wait=True, timeout=max(1.0, deadline - time.monotonic()))
        self._pool = pool

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        await self.open()
        if self._conn is not None:
            yield self._conn
            return
        if self._pool is None:  # pragma: no cover - open() sets one of them
            raise TransportClosed()
        async with self._pool.connection() as conn:
            yield conn

    async def _rows(self, name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Run the named statement in its own transaction; return its rows."""
        if self._closed:
            raise TransportClosed()
        with wrap_errors(f"pgque {name} failed", self._secret):
            async with self._connection() as conn:
                if conn.autocommit:
                    # The statement is its own transaction: one round trip.
                    cursor = await conn.execute(queries()[name], params, prepare=self._prepare)
                    return await cursor.fetchall()
                async with conn.transaction():
                    cursor = await conn.execute(queries()[name], params, prepare=self._prepare)
                    return await cursor.fetchall()

    async def _value(self, name: str, params: dict[str, Any]) -> Any:
        rows = await self._rows(name, params)
        if len(rows) != 1:
            raise PgqueError(f"pgque {name} returned {len(rows)} rows instead of one")
        return rows[0][0]

    def _now(self) -> float | None:
        """The injected clock's time, or None: the server's clock judges."""
        clock = self._options.clock
        return None if clock is None else float(clock())

    def _lease(self, lease: object) -> Lease:
        """Check *lease* is a Lease of this queue and of PostgreSQL (no I/O); :meth:`_from_here`
        checks its store."""
        return check_backend(check_lease(lease, self.queue, None), ORIGIN)

    async def _from_here(self, leases: Iterable[Lease]) -> None:
        """Raise InvalidInput unless every lease of *leases* was issued by this transport's
        store (this PostgreSQL server and database): opens the transport to learn which."""
        leases = list(leases)
        if not leases:
            return
        await self.open()
        for lease in leases:
            check_store(lease, self._origin)

    def _error(self, error: object) -> str | None:
        """Return *error* as the ErrorInfo JSON the functions store, or None (checked first).

        Without an injected clock its ``at`` is left null for the server to fill in with its
        own clock, as every other time of the queue; an ErrorInfo given whole keeps its own.
        """
        now = self._now()
        return self._error_json(check_error(error, 0.0 if now is None else now), error, now)

    @staticmethod
    def _error_json(info: ErrorInfo | None, error: object, now: float | None) -> str | None:
        """Return checked *info* (from *error*, as given) as the JSON the functions store."""
        if info is None:
            return None
        if now is not None or isinstance(error, ErrorInfo):
            return info.to_json()
        fields = {"type": info.type, "message": info.message, "traceback": info.traceback}
        return json.dumps({**fields, "at": None}, ensure_ascii=False, separators=(",", ":"))

    # -- operations ----------------------------------------------------------------------

    @traced_publish
    async def publish(
        self,
        group_id: str,
        event: Event,
        *,
        priority: int = 0,
        delay: float = 0.0,
        connection: AsyncConnection[Any] | None = None,
    ) -> int:
        """Append *event* to *group_id*'s tail and return its message id.

        With *delay* > 0 (seconds, at most a year) the message is scheduled: it joins the
        group's tail when the delay has passed by the server's clock, keeping the returned id
        (docs/scheduling.md). With *connection*, the publish runs on that connection inside its
        open transaction (the transactional outbox): a rollback drops the message, a commit
        publishes (or schedules) it. Raises InvalidInput for a bad group id, priority, delay,
        event or connection; ConnectionLost or PgqueError when the database fails.
        """
        self._check_open()
        wait = check_delay(delay)
        params: dict[str, Any] = {
            "queue": self.queue,
            "group_id": check_group_id(group_id),
            "priority": check_priority(priority),
            "event": self._options.event(event),
            "now": self._now(),
        }
        name = "publish"
        if wait > 0:
            name, params["delay"] = "schedule", wait
        if connection is None:
            return int(await self._value(name, params))
        rows = await self._on_caller_connection(connection, name, params)
        return int(rows[0][0])

    @traced_publish
    async def publish_many(
        self,
        items: Iterable[tuple[str, Event]],
        *,
        priority: int = 0,
        delay: float = 0.0,
        connection: AsyncConnection[Any] | None = None,
    ) -> list[int]:
        """Append many (group_id, event) pairs atomically, in order; return their ids.

        With *delay* > 0 every item is scheduled with the same due time, as :meth:`publish`
        says. *connection* joins the caller's transaction as for :meth:`publish`.
        """
        self._check_open()
        priority = check_priority(priority)
        wait = check_delay(delay)
        checked = self._options.items(items)
        if not checked:
            return []
        params: dict[str, Any] = {
            "queue": self.queue,
            "group_ids": [group_id for group_id, _event, _text in checked],
            "events": [text for _group_id, _event, text in checked],
            "priority": priority,
            "now": self._now(),
        }
        name = "publish_many"
        if wait > 0:
            name, params["delay"] = "schedule_many", wait
        if connection is None:
            ids = await self._value(name, params)
        else:
            ids = (await self._on_caller_connection(connection, name, params))[0][0]
        return [int(i) for i in ids]

    async def cancel(self, message_id: int) -> bool:
        """Drop a scheduled message that is not due yet; True if it was dropped.

        False when it is due (joined or not), delivered, unknown, or was published without a
        delay. Raises InvalidInput for an id that is not a positive int.
        """
        self._check_open()
        params = {
            "queue": self.queue,
            "message_id": check_message_id(message_id),
            "now": self._now(),
        }
        return bool(await self._value("cancel", params))

    async def scheduled(
        self, *, limit: int = 100, after: int | None = None
    ) -> list[ScheduledMessage]:
        """Up to *limit* (1-1,000) scheduled messages not due yet, in id order, after id *after*.

        A stored event that is not Event JSON shows the kind ``pgque.undecodable``.
        """
        self._check_open()
        checked_limit, checked_after = check_scheduled_page(limit, after)
        params = {
            "queue": self.queue,
            "limit": checked_limit,
            "after": checked_after,
            "now": self._now(),
        }
        rows = await self._rows("scheduled", params)
        return [
            ScheduledMessage(
                id=message_id,
                group_id=group_id,
                due_at=due_at,
                kind=self._decode_dead(text).kind,
                priority=priority,
                enqueued_at=enqueued_at,
            )
            for message_id, group_id, due_at, text, priority, enqueued_at in rows
        ]

    async def publish_tick(
        self, entry: str, tick: float, group_id: str, event: Event, *, priority: int = 0
    ) -> int | None:
        """Publish *event* as tick *tick* of schedule entry *entry*, once per queue.

        Appended (an ordinary publish) only if no tick of *entry* at or after *tick* was
        published; the check, recording the tick and the append are one transaction, so of
        several schedulers exactly one appends. Returns the message id, or None.
        """
        self._check_open()
        params = {
            "queue": self.queue,
            "entry": check_entry_name(entry),
            "tick": check_tick(tick),
            "group_id": check_group_id(group_id),
            "event": self._options.event(event),
            "priority": check_priority(priority),
            "now": self._now(),
        }
        value = await self._value("publish_tick", params)
        return None if value is None else int(value)

    async def server_time(self) -> float:
        """Return the database server's time now, epoch seconds (``clock_timestamp()``; the
        injected clock when there is one). Raises ConnectionLost or PgqueError."""
        self._check_open()
        now = self._now()
        if now is not None:
            return now
        return float(await self._value("server_time", {}))

    async def last_tick(self, entry: str) -> float | None:
        """The latest tick of *entry* published by :meth:`publish_tick`, or None."""
        self._check_open()
        params = {"queue": self.queue, "entry": check_entry_name(entry)}
        value = await self._value("last_tick", params)
        return None if value is None else float(value)

    async def _on_caller_connection(
        self, connection: AsyncConnection[Any], name: str, params: dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        if not isinstance(connection, AsyncConnection):
            raise InvalidInput(
                f"connection must be a psycopg AsyncConnection, not {type(connection).__name__}"
            )
        await self.open()
        with wrap_errors(f"pgque {name} failed", self._secret):
            cursor = await connection.execute(queries()[name], params, prepare=self._prepare)
            return await cursor.fetchall()

    async def claim(
        self, visibility: float = 30.0, *, min_priority: int = 0, holder: str | None = None
    ) -> Lease | None:
        """Lease the head of the longest-unserved claimable group, or return None.

        *holder* labels the lease (``GroupInfo.lease_holder``), at most 200 characters.
        """
        leases = await self.claim_many(1, visibility, min_priority=min_priority, holder=holder)
        return leases[0] if leases else None

    async def claim_many(
        self,
        n: int,
        visibility: float = 30.0,
        *,
        min_priority: int = 0,
        holder: str | None = None,
    ) -> list[Lease]:
        """Lease the heads of up to *n* distinct groups (never two of one group).

        A group's head is its lowest message id; paused groups are passed over. Each event is
        decoded on its own: one whose stored text is not Event JSON (written into the table by
        hand, say) is dead-lettered through the lease just taken, with a reason starting
        ``undecodable event``, and the others are returned. Raises InvalidInput for a bad n,
        visibility, min_priority or holder (before any I/O); ConnectionLost or PgqueError when
        the database fails.
        """
        self._check_open()
        params = {
            "queue": self.queue,
            "n": check_batch_size(n),
            "visibility": check_seconds(visibility, "visibility"),
            "min_priority": check_priority(min_priority, "min_priority"),
            "max_attempts": self._options.max_attempts,
            "on_exhausted": self._options.on_exhausted,
            "holder": check_holder(holder),
            "now": self._now(),
        }
        return await self._leases(await self._rows("claim", params))

    async def _leases(self, rows: Iterable[Sequence[Any]]) -> list[Lease]:
        """Build the leases of claimed rows, decoding each event on its own.

        A row whose event text is not Event JSON is dead-lettered through its own lease
        (``undecodable event: ...``) and left out; the others are returned, in row order.
        """
        leases: list[Lease] = []
        queue = self.queue
        for group_id, message_id, text, token, priority, attempt, expires_at in rows:
            try:
                event = Event.from_json(text)
            # Any failure, not only ValueError: json raises RecursionError on deeply nested
            # text, and one bad row must not strand the batch's other leases.
            except Exception as exc:
                await self._bury_undecodable(group_id, message_id, token, exc)
                continue
            # Lease(...) with an Event instance is cheaper than Lease.model_construct here
            # (pydantic does not validate the instance again); measured in docs/postgres.md.
            leases.append(
                Lease(
                    group_id=group_id,
                    message_id=message_id,
                    event=event,
                    token=token,
                    priority=priority,
                    attempt=attempt,
                    expires_at=expires_at,
                    queue=queue,
                    origin=self._origin,
                )
            )
        return leases

    async def settle_and_claim(
        self,
        settlements: Sequence[Settlement],
        n: int,
        visibility: float = 30.0,
        *,
        min_priority: int = 0,
        holder: str | Sequence[str] | None = None,
    ) -> SettleResult:
        """Settle finished leases, then lease up to *n* new heads: one call, one transaction.

        Each :class:`Settlement` acts as its ``ack``/``nack``/``release``/``dead_letter``
        would, in order, each fenced on its own (``settled[i]`` False: the lease is no longer
        held, nothing changed); then up to *n* (0-10,000) heads of distinct claimable groups
        are leased as :meth:`claim_many` leases them (an undecodable head is dead-lettered the
        same way). One round trip: ``pgque_settle_claim_v1``. Raises InvalidInput before any
        I/O for a bad settlement, n, visibility, min_priority or holder; ConnectionLost,
        RetryableConflict or PgqueError when the database fails (then nothing was settled).
        """
        self._check_open()
        now = self._now()
        checked = check_settlements(settlements, self.queue, None, 0.0 if now is None else now)
        for item in checked:
            check_backend(item.lease, ORIGIN)
        n = check_claim_count(n)
        params = {
            "queue": self.queue,
            "outcomes": [item.outcome for item in checked],
            "group_ids": [item.lease.group_id for item in checked],
            "message_ids": [item.lease.message_id for item in checked],
            "tokens": [item.lease.token for item in checked],
            "delays": [item.delay for item in checked],
            "reasons": [item.reason for item in checked],
            "errors": [
                self._error_json(item.error, original.error, now)
                for item, original in zip(checked, settlements, strict=True)
            ],
            "n": n,
            "visibility": check_seconds(visibility, "visibility"),
            "min_priority": check_priority(min_priority, "min_priority"),
            "max_attempts": self._options.max_attempts,
            "on_exhausted": self._options.on_exhausted,
            "holders": check_holders(holder, n),
            "now": now,
        }
        await self._from_here(item.lease for item in checked)
        rows = await self._rows("settle_claim", params)
        if not rows or rows[0][0] is None:
            raise PgqueError("pgque settle_claim returned no settlement row")
        settled = [bool(ok) for ok in rows[0][0]]
        leases = await self._leases(row[1:] for row in rows[1:])
        return SettleResult(settled, leases)

    async def _bury_undecodable(
        self, group_id: str, message_id: int, token: str, exc: Exception
    ) -> None:
        """Dead-letter a just-leased message whose event text cannot be decoded (fenced)."""
        reason = f"{UNDECODABLE_REASON}: {exc}".replace("\x00", "")[:MAX_REASON_CHARS]
        params = {
            "queue": self.queue,
            "group_id": group_id,
            "message_id": message_id,
            "token": token,
            "reason": reason,
            "error": None,
            "now": self._now(),
        }
        # If this fails, the other leases of the batch are still held and must reach the
        # caller; the bad one stays leased until it expires and the next claim tries again.
        with contextlib.suppress(PgqueError):
            await self._value("dead_letter", params)

    def _fence(self, lease: Lease) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "group_id": lease.group_id,
            "message_id": lease.message_id,
            "token": lease.token,
            "now": self._now(),
        }

    async def ack(self, lease: Lease) -> bool:
        """Remove the leased message and free its group; False if the lease is not held."""
        self._check_open()
        params = self._fence(self._lease(lease))
        await self._from_here([lease])
        return bool(await self._value("ack", params))

    async def ack_many(self, leases: Sequence[Lease]) -> list[bool]:
        """Ack several leases in one call; one result per lease, in order."""
        self._check_open()
        checked = [self._lease(lease) for lease in leases]
        if not checked:
            return []
        await self._from_here(checked)
        params = {
            "queue": self.queue,
            "group_ids": [lease.group_id for lease in checked],
            "message_ids": [lease.message_id for lease in checked],
            "tokens": [lease.token for lease in checked],
            "now": self._now(),
        }
        return [bool(ok) for ok in await self._value("ack_many", params)]

    async def nack(
        self, lease: Lease, *, delay: float = 0.0, error: ErrorLike | None = None
    ) -> bool:
        """Give the message back (the attempt counts); with *delay* > 0 park its group.

        *error* (an exception, a string or an ErrorInfo) is stored, bounded, as the message's
        ``last_error``; without it the stored one stays. False if the lease is not held.
        """
        self._check_open()
        params = self._fence(self._lease(lease))
        params["delay"] = check_seconds(delay, "delay")
        params["error"] = self._error(error)
        await self._from_here([lease])
        return bool(await self._value("nack", params))

    async def release(self, lease: Lease) -> bool:
        """Give the message back for immediate redelivery without counting the attempt.

        Its attempt count goes back down by one and its group is claimable at once (behind the
        groups served earlier, as after a nack). Fenced like ``ack``: False if not held.
        """
        self._check_open()
        params = self._fence(self._lease(lease))
        await self._from_here([lease])
        return bool(await self._value("release", params))

    async def extend(self, lease: Lease, visibility: float) -> Lease | None:
        """Renew a held lease to expire *visibility* seconds from now; None if not held."""
        self._check_open()
        lease = self._lease(lease)
        params = self._fence(lease)
        params["visibility"] = check_seconds(visibility, "visibility")
        await self._from_here([lease])
        until = await self._value("extend", params)
        return None if until is None else lease.model_copy(update={"expires_at": float(until)})

    async def dead_letter(
        self, lease: Lease, reason: str, *, error: ErrorLike | None = None
    ) -> bool:
        """Move the leased message to the dead-letter store; its group continues.

        ``DeadLetter.error`` is *error*, else the message's last recorded error.
        """
        self._check_open()
        params = self._fence(self._lease(lease))
        params["reason"] = check_reason(reason)
        params["error"] = self._error(error)
        await self._from_here([lease])
        return bool(await self._value("dead_letter", params))

    async def dead_letters(self, limit: int = 100, *, after: int | None = None) -> list[DeadLetter]:
        """List up to *limit* dead letters in id order (oldest first), those after id *after*.

        A dead letter whose stored text is not Event JSON is shown with a stand-in event of kind
        ``pgque.undecodable`` whose data holds the text (cut to 4,096 characters) and the error;
        ``redrive`` publishes the stored text itself.
        """
        self._check_open()
        params = {"queue": self.queue, "limit": check_limit(limit), "after": check_after_id(after)}
        rows = await self._rows("dead_letters", params)
        return [
            DeadLetter(
                id=dead_id,
                group_id=group_id,
                message_id=message_id,
                event=self._decode_dead(text),
                priority=priority,
                attempts=attempts,
                reason=reason,
                failed_at=failed_at,
                error=_error_info(error),
            )
            for (
                dead_id,
                group_id,
                message_id,
                text,
                priority,
                attempts,
                reason,
                failed_at,
                error,
            ) in rows
        ]

    async def delete_dead_letters(self, ids: Sequence[int]) -> int:
        """Delete the dead letters with these ids; return how many existed and were deleted.

        Raises InvalidInput when *ids* is not a sequence of ints (None included).
        """
        self._check_open()
        if ids is None:
            raise InvalidInput("ids must be a sequence of ints, not None")
        checked = check_ids(ids)
        return int(await self._value("delete_dead_letters", {"queue": self.queue, "ids": checked}))

    @staticmethod
    def _decode_dead(text: str) -> Event:
        """Decode a dead letter's event; undecodable text is shown as a stand-in event."""
        try:
            return Event.from_json(text)
        except Exception as exc:  # RecursionError too (see claim_many)
            return _stand_in(text, exc)

    async def redrive(
        self, ids: Sequence[int] | None = None, *, in_place: bool = True, retry_now: bool = False
    ) -> int:
        """Return dead letters (all when *ids* is None) to their groups; return how many.

        In place (the default) each goes back with its original message id, so it comes before
        every later message of its group not yet delivered, with a fresh attempt count and its
        dead letter's error as its last error; a missing group is created with the dead
        letter's priority, and a group waiting out a retry delay keeps waiting unless
        *retry_now*. With ``in_place=False`` each is published anew at its group's tail.
        """
        self._check_open()
        for name, flag in (("in_place", in_place), ("retry_now", retry_now)):
            if not isinstance(flag, bool):
                raise InvalidInput(f"{name} must be a bool, not {flag!r}")
        params = {
            "queue": self.queue,
            "ids": check_ids(ids),
            "in_place": in_place,
            "retry_now": retry_now,
            "now": self._now(),
        }
        return int(await self._value("redrive", params))

    async def pause(self, group_id: str) -> bool:
        """Hold *group_id*: no claim leases it until :meth:`resume` (a lease out finishes).

        Publishes still append; an empty paused group is kept; a group that does not exist yet
        is created paused (priority 0). False if it was already paused.
        """
        self._check_open()
        params = {"queue": self.queue, "group_id": check_group_id(group_id)}
        return bool(await self._value("pause", params))

    async def resume(self, group_id: str) -> bool:
        """Lift the hold of :meth:`pause`; False if the group is not paused.

        A resumed group without messages is removed.
        """
        self._check_open()
        params = {"queue": self.queue, "group_id": check_group_id(group_id), "now": self._now()}
        return bool(await self._value("resume", params))

    async def group(self, group_id: str) -> GroupInfo | None:
        """Everything about one group at the server's now, or None if there is no such group."""
        self._check_open()
        params = {"queue": self.queue, "group_id": check_group_id(group_id), "now": self._now()}
        rows = await self._rows("group", params)
        return _group_info(rows[0]) if rows else None

    async def groups(
        self,
        *,
        state: GroupStateName | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[GroupInfo]:
        """Up to *limit* (1-1,000) groups in byte order of id, those after *after*.

        Keyset paging: pass the last ``group_id`` of a page as *after* for the next one. With
        *state*, only groups in that state. Each page is a range of an index (docs/postgres.md).
        """
        self._check_open()
        checked_state, checked_limit, checked_after = check_groups_page(state, limit, after)
        params = {
            "queue": self.queue,
            "state": checked_state,
            "limit": checked_limit,
            "after": checked_after,
            "now": self._now(),
        }
        return [_group_info(row) for row in await self._rows("groups", params)]

    async def oldest_groups(
        self,
        *,
        limit: int = 10,
        state: GroupStateName | None = None,
    ) -> list[GroupInfo]:
        """Up to *limit* (1-1,000) groups holding a message, the oldest head first.

        Ordered by ``head_enqueued_at``, then group id in byte order; with *state*, only groups
        in that state. One function walks the queue's messages in enqueue-time order (an index)
        and stops after *limit* heads: it reads the messages older than the last head it
        returns (docs/postgres.md). Raises InvalidInput for a bad state or limit.
        """
        self._check_open()
        checked_state, checked_limit = check_oldest_groups(state, limit)
        params = {
            "queue": self.queue,
            "state": checked_state,
            "limit": checked_limit,
            "now": self._now(),
        }
        return [_group_info(row) for row in await self._rows("oldest_groups", params)]

    async def unblock(
        self, group_id: str, *, drop_head: bool = False, head: int | None = None
    ) -> bool:
        """Release a group blocked by ``on_exhausted="block"``.

        The head is retried with a fresh attempt count, or dead-lettered when *drop_head*.
        With *head* (a message id), only if that message is still the group's head.
        Returns False if the group is not blocked (or its head is another message).
        """
        self._check_open()
        params = {
            "queue": self.queue,
            "group_id": check_group_id(group_id),
            "drop_head": bool(drop_head),
            "head": check_head(head),
            "now": self._now(),
        }
        return bool(await self._value("unblock", params))

    async def retry_now(self, group_id: str) -> bool:
        """End the retry delay the group waits out: its head is claimable at once, its attempt
        count and last error kept (a paused group stays paused). False if it waits for none
        (absent, ready, leased or blocked)."""
        self._check_open()
        params = {"queue": self.queue, "group_id": check_group_id(group_id), "now": self._now()}
        return bool(await self._value("retry_now", params))

    async def wait_for_messages(self, timeout: float) -> bool:
        """Wait up to *timeout* seconds for news of claimable messages; True if some came.

        Idle workers call this instead of sleeping. The transport LISTENs on the queue's
        channel on a connection of its own, and the server notifies it when a publish (or
        publish_many, redrive, unblock, nack without delay) commits, so the wait ends at once.
        A True may be spurious (the caller claims and finds nothing); False means the time
        passed. The first call returns True as soon as it listens, since a publish just before
        that was not heard. The wait never runs past the due time of the queue's next scheduled
        message (it returns True then); a delayed publish notifies too, so a wait that began
        before a sooner-due message was scheduled ends and the caller waits again, capped anew.
        While a due message cannot join its group yet (a transaction holds the group's lock,
        so claims skip it) successive waits end after 20 ms, 40 ms, ... up to 1 s, not in a
        busy loop; the holder's commit notifies, so the wait then ends at once.
        With an injected connection (no DSN or pool to open one from) it
        only sleeps and returns False: polling is the fallback. Raises InvalidInput for a bad
        timeout, TransportClosed, ConnectionLost or PgqueError.
        """
        timeout = check_seconds(timeout, "timeout")
        self._check_open()
        await self.open()
        # Never sleep past the next due time of a scheduled message (two index probes).
        rows = await self._rows("next_due", {"queue": self.queue, "now": self._now()})
        due_now, due_in = rows[0] if rows else (False, None)
        caps: list[float] = []
        if due_in is not None:
            caps.append(max(float(due_in), _DUE_WAIT_FLOOR_S))
        if due_now:
            # Due but not joined: a claim lets it in unless its group's lock is held (a
            # transactional publish left open), and then claims find nothing; back off.
            caps.append(self._due_backoff)
            self._due_backoff = min(2 * self._due_backoff, _DUE_WAIT_BACKOFF_MAX_S)
        else:
            self._due_backoff = _DUE_WAIT_FLOOR_S
        if caps and min(caps) < timeout:
            with wrap_errors("pgque wait_for_messages failed", self._secret):
                await self._wakeups.wait(min(caps))
            return True
        with wrap_errors("pgque wait_for_messages failed", self._secret):
            return await self._wakeups.wait(timeout)

    async def _start_listening(self) -> bool:
        return await self._listen() is not None

    async def _notified(self, timeout: float) -> bool:
        conn = self._listen_conn
        if conn is None:  # pragma: no cover - the waiter listens first
            return False
        heard = False
        async for _note in conn.notifies(timeout=timeout, stop_after=1):
            heard = True
        return heard

    async def _drain_notifies(self) -> None:
        conn = self._listen_conn
        if conn is not None:
            async for _note in conn.notifies(timeout=0):
                pass

    async def _listen(self) -> AsyncConnection[Any] | None:
        """Open the dedicated connection and LISTEN on the queue's channel; None if there is
        nothing to open it from (no listen_url, and an injected connection or callable pool)."""
        conninfo: object = self._listen_url or self._dsn
        options: object = {}
        if conninfo is None and self._pool is not None:
            conninfo, options = self._pool.conninfo, self._pool.kwargs or {}
        # A pool built from callables (rotating credentials) gives nothing to copy: poll.
        if not isinstance(conninfo, str) or not isinstance(options, dict):
            return None
        # A listen_url host that drops packets must not hold a slot's wait for minutes.
        kwargs: dict[str, Any] = {**options, "autocommit": True}
        if "connect_timeout" not in {**conninfo_to_dict(conninfo), **kwargs}:
            kwargs["connect_timeout"] = max(2, int(self._timeout))
        conn = await AsyncConnection.connect(conninfo, **kwargs)
        try:
            cursor = await conn.execute(queries()["channel"], {"queue": self.queue}, prepare=False)
            row = await cursor.fetchone()
            if row is None:  # pragma: no cover - the function always returns a row
                raise PgqueError("pgque channel returned no row")
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(row[0])))
        except BaseException:
            await conn.close()
            raise
        self._listen_conn = conn
        return conn

    async def _drop_listener(self) -> None:
        conn, self._listen_conn = self._listen_conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):  # closing a broken connection
                await conn.close()

    async def stats(self) -> QueueStats:
        """Return counts of groups, messages, in-flight, parked, blocked, paused and dead letters.

        Each group counts in at most one of paused, blocked, in_flight and parked.
        """
        self._check_open()
        rows = await self._rows("stats", {"queue": self.queue, "now": self._now()})
        (groups, messages, in_flight, parked, blocked, dead, oldest, resume, paused) = rows[0][:9]
        scheduled, next_due_at = rows[0][9:]
        return QueueStats(
            groups=groups,
            messages=messages,
            in_flight=in_flight,
            parked=parked,
            blocked=blocked,
            dead_letters=dead,
            oldest_age_s=oldest,
            next_resume_at=resume,
            paused=paused,
            scheduled=scheduled,
            next_due_at=next_due_at,
        )

    async def queues(self) -> list[str]:
        """Return the names of every queue in this database that holds messages or dead letters.

        Sorted in byte order. Raises ConnectionLost when the server cannot be reached.
        """
        self._check_open()
        rows = await self._rows("queues", {})
        return [str(row[0]) for row in rows]

    async def purge(self) -> None:
        """Delete every message, group, dead letter, scheduled message and tick record of this
        queue (tests, operators)."""
        self._check_open()
        await self._rows("purge", {"queue": self.queue})

    async def close(self) -> None:
        """Close the pool this transport opened; injected connections stay open. Idempotent."""
        self._closed = True
        await self._drop_listener()
        pool, self._pool = self._pool, None
        if pool is not None and self._own_pool:
            try:
                await pool.close()
            except psycopg.Error as exc:  # pragma: no cover - closing a broken pool
                raise ConnectionLost(f"closing the pool failed: {exc}") from exc

    async def __aenter__(self) -> AsyncPostgresTransport:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
