"""The asyncio PostgreSQL driver: connections, the schema, and one server-side function call
per primitive (:class:`~pgque.core.AsyncDriver`)."""

# This file is the source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import psycopg
import psycopg_pool
from psycopg import AsyncConnection, sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

from pgque.core.browse import (
    MessageInfo,
    MessagePage,
    MessagesQuery,
    message_row,
    message_rows_page,
)
from pgque.core.connecting import Backoff, refused
from pgque.core.driver import GROUP_OPERATIONS, ClaimRequest, GroupCommand, Publication
from pgque.core.errors import ConnectionLost, InvalidInput, PgqueError, TransportClosed
from pgque.core.held import HeldLeases
from pgque.core.history import HistoryQuery, HistoryRetention, HistorySetting
from pgque.core.live_workers import (
    ALIVE_MULTIPLE,
    PRUNE_AFTER_S,
    WorkerBeat,
    encode_slots,
    worker_infos_of_rows,
)
from pgque.core.models import (
    Capabilities,
    DeadLetter,
    GroupInfo,
    GroupStateName,
    HistoryRecord,
    KeyInfo,
    KeyPolicy,
    Lease,
    QueueStats,
    ScheduledMessage,
    SettleResult,
    WorkerInfo,
)
from pgque.core.stored import (
    claimed_leases,
    dead_letter,
    error_json,
    group_info,
    history_record,
    key_info,
    key_policy,
    queue_stats,
    scheduled_message,
)
from pgque.core.transport_options import TransportOptions
from pgque.core.urls import mask_dsn, url_password
from pgque.core.validation import CheckedSettlement
from pgque.core.wakeups import AsyncWakeupWaiter, DueWait
from pgque.postgres_async._errors import (
    POOL_PREFIX,
    is_connection_error,
    quiet_pool_log,
    wrap_errors,
)
from pgque.postgres_async._foreign import psycopg_connection
from pgque.postgres_async._schema import check_schema, install_schema
from pgque.postgres_async._sql import queries

# sync: import threading

__all__ = ["AsyncPostgresDriver", "ORIGIN"]

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
    settle_in=True,  # a lease settled in the caller's transaction (_settle_in)
    fairness=True,  # fairness keys: pgque_fair_claim_v1 (docs/fairness.md)
    global_key_limits=True,
    history=True,  # job history: 55_history.sql (docs/history.md)
    browse=True,  # browse and search: 56_browse.sql (pgque.core.browse)
    workers=True,  # live workers: 57_workers.sql (docs/workers.md)
)

#: The shortest idle wait while a scheduled message is due but has not joined its group yet
#: (a publish holding the group's lock lets it in; a claim then sees it): no busy loop.
_DUE_WAIT_FLOOR_S = 0.02
#: While due messages stay unjoined (their group's lock is held: a claim skips them) the idle
#: wait doubles from the floor up to this (DueWait); the holder's commit notifies, ending it.
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


#: How often a driver that settles keeps the history's day partitions (creates the next days',
#: drops the expired: pgque_history_maintain_v1), seconds; and at each set_history.
HISTORY_UPKEEP_S = 600.0


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


def _key_of(items: Sequence[Publication]) -> str | None:
    """The one fairness key of a batch (``None``: the default key)."""
    keys = {item.fairness_key for item in items}
    if len(keys) > 1:
        raise InvalidInput("the items of one publish_many share one fairness key")
    return next(iter(keys), None)


#: Client-side TLS failures: the server's certificate will not change between attempts.
_TLS_FAILURES = ("certificate verify failed", "server certificate", "root certificate file")


def _retryable(exc: psycopg.Error, *, retry_refused: bool = True) -> bool:
    """Tell whether connecting again may succeed (the server is down or starting).

    With *retry_refused* False a refused connection (no server listening) is final: only a
    server that answers and says it is starting or busy is worth waiting for.
    """
    if not is_connection_error(exc) or exc.sqlstate in _FATAL_CONNECT_STATES:
        return False
    if not retry_refused and refused(exc):
        return False
    text = str(exc)
    if any(failure in text for failure in _TLS_FAILURES):
        return False
    # A FATAL refusal (bad password, unknown database or setting) will not change on retry.
    return "FATAL:" not in text or any(refusal in text for refusal in _TRANSIENT_REFUSALS)


def check_listen_url(url: object) -> str | None:
    """Return *url* if it is a libpq connection string (or None); raise InvalidInput if not."""
    if url is None:
        return None
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput(f"listen_url must be a postgresql:// URL, not {url!r}")
    try:
        conninfo_to_dict(url)
    except psycopg.Error as exc:
        secret = url_password(url)
        detail = str(exc).replace(secret, "***") if secret else str(exc)
        raise InvalidInput(
            f"listen_url {mask_dsn(url)!r} is not a libpq connection string ({detail}); give "
            "the direct server's postgresql:// URL (percent-encoded inside a queue URL)"
        ) from None
    return url


def _fence(lease: Lease) -> dict[str, Any]:
    """The parameters naming *lease* in every statement that settles or extends one."""
    return {"group_id": lease.group_id, "message_id": lease.message_id, "token": lease.token}


def _fences(items: Sequence[CheckedSettlement]) -> dict[str, Any]:
    """The array parameters naming the leases of *items* (settle_claim, ack_many)."""
    leases = [item.lease for item in items]
    return {
        "group_ids": [lease.group_id for lease in leases],
        "message_ids": [lease.message_id for lease in leases],
        "tokens": [lease.token for lease in leases],
    }


def _settlement_params(item: CheckedSettlement) -> dict[str, Any]:
    """The parameters of one settlement's statement (named after its outcome), but the queue
    and the time."""
    params = _fence(item.lease)
    if item.outcome == "nack":
        params.update(delay=item.delay, error=_error_json(item))
    elif item.outcome == "dead_letter":
        params.update(reason=item.reason, error=_error_json(item))
    return params


def _error_json(item: CheckedSettlement) -> str | None:
    """Return a settlement's error as the JSON the functions store (``at`` null: the server's
    clock is to time it, :func:`~pgque.core.stored.error_json`), None for none."""
    return None if item.error is None else error_json(item.error, item.store_clock)


class AsyncPostgresDriver:
    """One queue in one PostgreSQL database (asyncio): the connection source, the schema,
    LISTEN/NOTIFY, and the primitives of :class:`~pgque.core.AsyncDriver`. The source and
    options are :class:`~pgque.postgres_async.AsyncPostgresTransport`'s, checked there."""

    backend = ORIGIN
    capabilities = _CAPABILITIES

    def __init__(
        self,
        source: str | AsyncConnection[Any] | AsyncConnectionPool[Any],
        options: TransportOptions,
        *,
        setup: bool,
        min_size: int,
        max_size: int,
        timeout: float,
        retry_refused: bool,
        prepared_statements: bool,
        listen_url: str | None,
    ) -> None:
        self._options = options
        self.queue = options.queue
        #: leases in (or settled by) a caller's transaction: settle_in
        self.held = HeldLeases()
        self._timeout = timeout
        self._retry_refused = retry_refused
        # execute(prepare=False) never prepares; None leaves it to psycopg (after 5 runs).
        self.prepare: bool | None = None if prepared_statements else False
        self._listen_url = listen_url
        self._setup = setup
        self._min_size = min_size
        self._max_size = max_size
        self.dsn: str | None = None
        self._pool: AsyncConnectionPool[Any] | None = None
        #: the one connection the caller injected, if that is the source
        self.conn: AsyncConnection[Any] | None = None
        self._own_pool = False
        if isinstance(source, str):
            self.dsn = source
            self._own_pool = True
        elif isinstance(source, AsyncConnectionPool):
            self._pool = source
        elif isinstance(source, AsyncConnection):
            self.conn = source
        else:
            raise InvalidInput(
                "source must be a DSN, an AsyncConnection or an AsyncConnectionPool, "
                f"not {type(source).__name__}"
            )
        self.secret = url_password(self.dsn) if self.dsn else None
        self._closed = False
        #: ``Lease.origin`` of this store's leases, learnt when the driver opens
        self._origin = ""
        #: When the history's partitions were last kept (monotonic; see _maintain_history).
        self._history_upkeep_at = -math.inf
        self._open_lock = asyncio.Lock()
        # The LISTEN side of wait_for_messages: one dedicated connection, opened on first use;
        # the shared waiter lets one caller read it at a time and releases the others.
        self._listen_conn: AsyncConnection[Any] | None = None
        # When an idle wait ends for scheduled messages (see wait_for_messages).
        self._due = DueWait(_DUE_WAIT_FLOOR_S, _DUE_WAIT_BACKOFF_MAX_S)
        self._wakeups = AsyncWakeupWaiter(
            listening=lambda: self._listen_conn is not None,
            listen=self._start_listening,
            heard=self._notified,
            drain=self._drain_notifies,
            reset=self._drop_listener,
        )

    # -- connections ---------------------------------------------------------------------

    async def open(self) -> str:
        if self._closed:
            raise TransportClosed()
        if not self._origin:
            async with self._open_lock:
                # Another caller may have opened it while we waited for the lock.
                if not self._origin:
                    await self._connect()
        return self._origin

    async def _connect(self) -> None:
        if self.dsn is not None:
            await self._open_dsn(self.dsn)
        elif self._pool is not None:
            with wrap_errors("opening the pgque transport"):
                async with self._pool.connection() as conn:
                    await self._ready_schema(conn)
        elif self.conn is not None:
            await self._ready_schema(self.conn)

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
        backoff = Backoff(self._timeout, 0.1, 1.0)
        while True:
            try:
                conn = await _connect_within(dsn, backoff.remaining)
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
                if isinstance(exc, ConnectionLost) and backoff.late():
                    raise
                if not retry or backoff.late():
                    message = f"could not connect to {mask_dsn(dsn)}"
                    if retry:
                        message += f" within {self._timeout:g} s"
                    with wrap_errors(message, self.secret):
                        raise
                await asyncio.sleep(backoff.pause())
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
        with wrap_errors(f"could not open a pool on {mask_dsn(dsn)}", self.secret):
            await pool.open(wait=True, timeout=max(1.0, backoff.remaining))
        self._pool = pool

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        """Lend a connection of the source (opening the driver first)."""
        await self.open()
        if self.conn is not None:
            yield self.conn
            return
        if self._pool is None:  # pragma: no cover - open() sets one of them
            raise TransportClosed()
        async with self._pool.connection() as conn:
            yield conn

    async def rows(self, name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Run the named statement in its own transaction; return its rows."""
        if self._closed:
            raise TransportClosed()
        with wrap_errors(f"pgque {name} failed", self.secret):
            async with self.connection() as conn:
                if conn.autocommit:
                    # The statement is its own transaction: one round trip.
                    cursor = await conn.execute(queries()[name], params, prepare=self.prepare)
                    return await cursor.fetchall()
                async with conn.transaction():
                    cursor = await conn.execute(queries()[name], params, prepare=self.prepare)
                    return await cursor.fetchall()

    async def _value(self, name: str, params: dict[str, Any]) -> Any:
        rows = await self.rows(name, params)
        if len(rows) != 1:
            raise PgqueError(f"pgque {name} returned {len(rows)} rows instead of one")
        return rows[0][0]

    async def on_connection(
        self, connection: object, name: str, params: dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        """Run the named statement on the caller's *connection* (psycopg's, or SQLAlchemy's
        on psycopg 3: :mod:`._foreign`), inside its transaction."""
        caller = await psycopg_connection(connection)
        await self.open()
        with wrap_errors(f"pgque {name} failed", self.secret):
            cursor = await caller.execute(queries()[name], params, prepare=self.prepare)
            return await cursor.fetchall()

    async def _of_queue(self, name: str, **params: Any) -> list[tuple[Any, ...]]:
        """Run the named statement on this queue (``queue`` added to *params*); its rows."""
        return await self.rows(name, {"queue": self.queue, **params})

    async def _one(self, name: str, **params: Any) -> Any:
        """Run the named statement on this queue; its one value."""
        return await self._value(name, {"queue": self.queue, **params})

    # -- publishing ----------------------------------------------------------------------

    def publish_statement(
        self, items: Sequence[Publication], priority: int, delay: float, now: float | None
    ) -> tuple[str, dict[str, Any]]:
        """Return the statement and parameters that append *items* (one value: the ids)."""
        params: dict[str, Any] = {
            "queue": self.queue,
            "priority": priority,
            "now": now,
            "fkey": _key_of(items),
        }
        if len(items) == 1:
            params.update(group_id=items[0].group_id, event=items[0].text)
            name = "schedule" if delay > 0 else "publish"
        else:
            params.update(
                group_ids=[item.group_id for item in items], events=[item.text for item in items]
            )
            name = "schedule_many" if delay > 0 else "publish_many"
        if delay > 0:
            params["delay"] = delay
        return name, params

    @staticmethod
    def published(name: str, value: Any) -> list[int]:
        """The ids a publish statement returned."""
        return [int(value)] if name in ("publish", "schedule") else [int(i) for i in value]

    async def publish(
        self, items: Sequence[Publication], priority: int, delay: float, now: float | None
    ) -> list[int]:
        name, params = self.publish_statement(items, priority, delay, now)
        return self.published(name, await self._value(name, params))

    async def publish_on(
        self,
        connection: object,
        items: Sequence[Publication],
        priority: int,
        delay: float,
        now: float | None,
    ) -> list[int]:
        name, params = self.publish_statement(items, priority, delay, now)
        return self.published(name, (await self.on_connection(connection, name, params))[0][0])

    async def cancel(self, message_id: int, now: float | None) -> bool:
        return bool(await self._one("cancel", message_id=message_id, now=now))

    async def scheduled(
        self, limit: int, after: int | None, now: float | None
    ) -> list[ScheduledMessage]:
        rows = await self._of_queue("scheduled", limit=limit, after=after, now=now)
        return [scheduled_message(row) for row in rows]

    async def publish_tick(
        self, entry: str, tick: float, item: Publication, priority: int, now: float | None
    ) -> int | None:
        value = await self._one(
            "publish_tick",
            entry=entry,
            tick=tick,
            group_id=item.group_id,
            event=item.text,
            priority=priority,
            fkey=item.fairness_key,
            now=now,
        )
        return None if value is None else int(value)

    async def last_tick(self, entry: str) -> float | None:
        value = await self._one("last_tick", entry=entry)
        return None if value is None else float(value)

    async def server_time(self) -> float:
        """The database server's ``clock_timestamp()``, epoch seconds."""
        return float(await self._value("server_time", {}))

    # -- claiming and settling -----------------------------------------------------------

    async def settle_and_claim(
        self, settlements: Sequence[CheckedSettlement], claim: ClaimRequest, now: float | None
    ) -> SettleResult:
        if settlements and time.monotonic() - self._history_upkeep_at >= HISTORY_UPKEEP_S:
            await self._maintain_history(now)
        rest, done = self.held.answer(settlements)
        if not done:
            return await self._settle_and_claim(settlements, claim, now)
        # Leases a caller's transaction settled (settle_in): True, and no round trip for them.
        result = await self._settle_and_claim(rest, claim, now) if rest or claim.n else None
        applied = result.settled if result is not None else []
        merged = self.held.merge(applied, done, len(settlements))
        return SettleResult(merged, result.leases if result is not None else [])

    async def _settle_and_claim(
        self, settlements: Sequence[CheckedSettlement], claim: ClaimRequest, now: float | None
    ) -> SettleResult:
        # The common calls have lighter functions of their own, with the same effect.
        if not settlements and len(set(claim.holders)) <= 1:
            holder = claim.holders[0] if claim.holders else None
            return SettleResult([], await self._claim(claim, holder, now) if claim.n else [])
        if claim.n == 0 and len(settlements) == 1:
            return SettleResult([await self._settle_one(settlements[0], now)], [])
        if claim.n == 0 and all(item.outcome == "ack" for item in settlements):
            return SettleResult(await self._ack_many(settlements, now), [])
        rows = await self._of_queue(
            "settle_claim",
            outcomes=[item.outcome for item in settlements],
            **_fences(settlements),
            delays=[item.delay for item in settlements],
            reasons=[item.reason for item in settlements],
            errors=[_error_json(item) for item in settlements],
            n=claim.n,
            visibility=claim.visibility,
            min_priority=claim.min_priority,
            max_attempts=self._options.max_attempts,
            on_exhausted=self._options.on_exhausted,
            holders=claim.holders,
            now=now,
        )
        if not rows or rows[0][0] is None:
            raise PgqueError("pgque settle_claim returned no settlement row")
        leases = await self._leases((row[1:] for row in rows[1:]), now)
        return SettleResult([bool(ok) for ok in rows[0][0]], leases)

    async def _claim(
        self, claim: ClaimRequest, holder: str | None, now: float | None
    ) -> list[Lease]:
        rows = await self._of_queue(
            "claim",
            n=claim.n,
            visibility=claim.visibility,
            min_priority=claim.min_priority,
            max_attempts=self._options.max_attempts,
            on_exhausted=self._options.on_exhausted,
            holder=holder,
            now=now,
        )
        return await self._leases(rows, now)

    async def _leases(self, rows: Any, now: float | None) -> list[Lease]:
        """Build the leases of claimed rows, decoding each event on its own.

        A row whose event text is not Event JSON is dead-lettered through its own lease
        (``undecodable event: ...``) and left out; the others are returned, in row order.
        """
        leases, bad = claimed_leases(rows, self.queue, self._origin)
        for item in bad:
            fence = {"group_id": item.group_id, "message_id": item.message_id, "token": item.token}
            # If this fails, the batch's other leases are still held and must reach the
            # caller; the bad one stays leased until it expires and a claim tries again.
            with contextlib.suppress(PgqueError):
                await self._one("dead_letter", **fence, reason=item.reason, error=None, now=now)
        return leases

    async def _settle_one(self, item: CheckedSettlement, now: float | None) -> bool:
        return bool(await self._one(item.outcome, **_settlement_params(item), now=now))

    async def settle_on(
        self, connection: object, item: CheckedSettlement, now: float | None
    ) -> bool:
        """Apply *item* on the caller's *connection*, inside its transaction (settle_in)."""
        params = {"queue": self.queue, **_settlement_params(item), "now": now}
        rows = await self.on_connection(connection, item.outcome, params)
        return bool(rows[0][0])

    async def hold_on(
        self, connection: object, lease: Lease, visibility: float, now: float | None
    ) -> float | None:
        """Extend *lease* on the caller's *connection*: its group row stays locked until the
        caller's transaction ends, so no claim takes the group meanwhile; None if the lease is
        no longer the group's (settle_in)."""
        params = {"queue": self.queue, **_fence(lease), "visibility": visibility, "now": now}
        rows = await self.on_connection(connection, "extend", params)
        until = rows[0][0]
        return None if until is None else float(until)

    async def caller_connection(self, connection: object) -> AsyncConnection[Any]:
        """The psycopg connection under the caller's *connection* (:mod:`._foreign`)."""
        return await psycopg_connection(connection)

    def transaction(self, connection: AsyncConnection[Any]) -> AbstractAsyncContextManager[Any]:
        """Begin a transaction on *connection*, or a savepoint in the one open (settle_in)."""
        return connection.transaction()

    async def _ack_many(self, items: Sequence[CheckedSettlement], now: float | None) -> list[bool]:
        return [bool(ok) for ok in await self._one("ack_many", **_fences(items), now=now)]

    async def extend(self, lease: Lease, visibility: float, now: float | None) -> float | None:
        if self.held.is_open(lease.token):
            # A caller's transaction holds the group (settle_in): it cannot be claimed.
            return (time.time() if now is None else now) + visibility
        until = await self._one("extend", **_fence(lease), visibility=visibility, now=now)
        return None if until is None else float(until)

    # -- dead letters --------------------------------------------------------------------

    async def dead_letters(self, limit: int, after: int | None) -> list[DeadLetter]:
        rows = await self._of_queue("dead_letters", limit=limit, after=after)
        return [dead_letter(row) for row in rows]

    async def redrive(
        self, ids: list[int] | None, in_place: bool, retry_now: bool, now: float | None
    ) -> int:
        return int(
            await self._one("redrive", ids=ids, in_place=in_place, retry_now=retry_now, now=now)
        )

    async def delete_dead_letters(self, ids: list[int]) -> int:
        return int(await self._one("delete_dead_letters", ids=ids))

    # -- groups --------------------------------------------------------------------------

    async def command(
        self, group_id: str, command: GroupCommand, head: int | None, now: float | None
    ) -> bool:
        name, drop = GROUP_OPERATIONS[command]
        params: dict[str, Any] = {} if command == "pause" else {"now": now}
        if drop is not None:
            params.update(drop_head=drop, head=head)
        return bool(await self._one(name, group_id=group_id, **params))

    async def group(self, group_id: str, now: float | None) -> GroupInfo | None:
        rows = await self._of_queue("group", group_id=group_id, now=now)
        return group_info(rows[0]) if rows else None

    async def groups(
        self,
        state: GroupStateName | None,
        limit: int,
        after: str | None,
        now: float | None,
        prefix: str | None = None,
    ) -> list[GroupInfo]:
        if prefix is not None:
            rows = await self._of_queue(
                "groups_prefixed", state=state, limit=limit, after=after, prefix=prefix, now=now
            )
        else:
            rows = await self._of_queue("groups", state=state, limit=limit, after=after, now=now)
        return [group_info(row) for row in rows]

    # -- browse and search (56_browse.sql; pgque.core.browse) ----------------------------

    async def messages(self, query: MessagesQuery, now: float | None) -> MessagePage:
        rows = await self._of_queue(
            "messages",
            group_id=query.group_id,
            kind=query.kind,
            limit=query.limit,
            after=query.after,
            now=now,
        )
        return message_rows_page(rows)

    async def message(self, message_id: int, now: float | None) -> MessageInfo | None:
        rows = await self._of_queue("message", message_id=message_id, now=now)
        return message_row(rows[0]) if rows else None

    async def group_scheduled(
        self, group_id: str, limit: int, after: int | None, now: float | None
    ) -> list[ScheduledMessage]:
        rows = await self._of_queue(
            "group_scheduled", group_id=group_id, limit=limit, after=after, now=now
        )
        return [scheduled_message(row) for row in rows]

    async def oldest_groups(
        self, state: GroupStateName | None, limit: int, now: float | None
    ) -> list[GroupInfo]:
        rows = await self._of_queue("oldest_groups", state=state, limit=limit, now=now)
        return [group_info(row) for row in rows]

    # -- fairness keys (docs/fairness.md) ------------------------------------------------

    async def set_key_policy(self, key: str | None, policy: KeyPolicy) -> None:
        await self._of_queue(
            "set_key_policy",
            fkey=key,
            weight=policy.weight,
            max_in_flight=policy.max_in_flight,
            rate=policy.rate,
            per=policy.per,
            burst=policy.burst,
        )

    async def key_policy(self, key: str | None) -> KeyPolicy | None:
        rows = await self._of_queue("key_policy", fkey=key)
        return key_policy(rows[0]) if rows else None

    async def delete_key_policy(self, key: str | None) -> bool:
        return bool(await self._one("delete_key_policy", fkey=key))

    async def key_info(self, key: str, now: float | None) -> KeyInfo | None:
        rows = await self._of_queue("key_info", fkey=key, now=now)
        return key_info(rows[0]) if rows else None

    async def keys(self, limit: int, after: str | None, now: float | None) -> list[KeyInfo]:
        rows = await self._of_queue("keys", limit=limit, after=after, now=now)
        return [key_info(row) for row in rows]

    async def set_history(self, setting: HistorySetting) -> None:
        retention = setting if isinstance(setting, HistoryRetention) else None  # None: "off"
        await self._of_queue(
            "set_history",
            on=retention is not None,
            keep_s=None if retention is None else retention.keep_s,
            max_rows=None if retention is None else retention.max_rows,
        )
        clock = self._options.clock
        await self._maintain_history(None if clock is None else float(clock()))

    async def history(self, query: HistoryQuery, now: float | None) -> list[HistoryRecord]:
        rows = await self._of_queue(
            "history",
            group_id=query.group_id,
            kind=query.kind,
            since=query.since,
            outcome=query.outcome,
            message_id=query.message_id,
            limit=query.limit,
            after=query.after,
            now=now,
        )
        return [history_record(row) for row in rows]

    async def heartbeat(self, beat: WorkerBeat, now: float | None) -> None:
        await self._of_queue(
            "heartbeat",
            worker_id=beat.id,
            holder=beat.holder,
            host=beat.host,
            pid=beat.pid,
            version=beat.version,
            concurrency=beat.concurrency,
            every=beat.heartbeat_every,
            slots=encode_slots(beat),
            prune_s=PRUNE_AFTER_S,
            now=now,
        )

    async def goodbye(self, worker: str) -> bool:
        return bool(await self._one("goodbye", worker_id=worker))

    async def workers(self, include_gone: bool, now: float | None) -> list[WorkerInfo]:
        rows = await self._of_queue(
            "workers", include_gone=include_gone, alive_multiple=ALIVE_MULTIPLE, now=now
        )
        return worker_infos_of_rows(rows, self.queue)

    async def _maintain_history(self, now: float | None) -> None:
        """Keep the history's day partitions (pgque_history_maintain_v1): at a setting, and
        every HISTORY_UPKEEP_S from a settlement (cheap when there is nothing to do)."""
        self._history_upkeep_at = time.monotonic()
        await self.rows("history_maintain", {"now": now})

    async def stats(self, now: float | None) -> QueueStats:
        return queue_stats((await self._of_queue("stats", now=now))[0])

    async def queues(self) -> list[str]:
        return [str(row[0]) for row in await self.rows("queues", {})]

    async def purge(self) -> None:
        await self._of_queue("purge")

    # -- wake-ups ------------------------------------------------------------------------

    async def wait_for_messages(self, timeout: float, now: float | None) -> bool:
        """Wait for a NOTIFY on the queue's channel, LISTENing on a connection of its own (from
        *listen_url*, else the source's DSN or pool); on an injected connection it only sleeps
        and returns False: polling."""
        await self.open()
        # Never sleep past the next due time of a scheduled message (two index probes).
        rows = await self.rows("next_due", {"queue": self.queue, "now": now})
        due_now, due_in = rows[0] if rows else (False, None)
        # Due but not joined: a claim lets it in unless its group's lock is held (a
        # transactional publish left open), and then claims find nothing; back off.
        due = self._due.cap(timeout, None if due_in is None else float(due_in), bool(due_now))
        with wrap_errors("pgque wait_for_messages failed", self.secret):
            return await self._wakeups.wait(timeout, due)

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
        conninfo: object = self._listen_url or self.dsn
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

    async def close(self) -> None:
        """Close the pool this driver opened; injected connections stay open. Idempotent."""
        self._closed = True
        await self._drop_listener()
        pool, self._pool = self._pool, None
        if pool is not None and self._own_pool:
            try:
                await pool.close()
            except psycopg.Error as exc:  # pragma: no cover - closing a broken pool
                raise ConnectionLost(f"closing the pool failed: {exc}") from exc
