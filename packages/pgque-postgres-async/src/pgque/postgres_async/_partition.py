"""The PostgreSQL partition adapter (asyncio API): pgque.partition's dedup window, persisted slot
count and key lock, through the statements of ``partition_queries.sql`` (shared-sql) and a
transaction-scoped advisory lock.

Registered in ``pgque.partition_adapters`` for
:class:`~pgque.postgres_async.AsyncPostgresTransport`.
"""

# The source of its blocking twin in pgque-postgres (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from functools import cache
from typing import Any

from pgque.core.errors import ConfigurationError
from pgque.core.models import Event
from pgque.core.partition_base import AsyncPartitionAdapterBase, Grant
from pgque.core.validation import check_event, check_group_id, check_priority
from pgque.postgres_async._errors import wrap_errors
from pgque.postgres_async._sql import sql_files
from pgque.postgres_async._transport import AsyncPostgresTransport
from pgque.postgres_async.named_sql import parse_named_sql

__all__ = ["AsyncPostgresPartitionAdapter", "partition_queries"]


@cache
def partition_queries() -> dict[str, str]:
    """Return the named statements of ``partition_queries.sql``."""
    text = (sql_files() / "partition_queries.sql").read_text(encoding="utf-8")
    return parse_named_sql(text)


class AsyncPostgresPartitionAdapter(AsyncPartitionAdapterBase):
    """The partition adapter of :class:`AsyncPostgresTransport`: server-side functions for the
    dedup window and the slot count, and the Exclusive tier's key lock as an advisory lock
    that lives exactly as long as its transaction.

    *lock_pool*: a psycopg pool for the lock transactions; default: the transport's own
    connection source.
    """

    name = "postgresql"
    key_locks = True

    def __init__(self, transport: AsyncPostgresTransport, *, lock_pool: Any = None) -> None:
        super().__init__(transport, lock_pool=lock_pool)
        self._postgres = transport
        self._lock_pool = lock_pool

    async def _rows(self, name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        self._postgres._check_open()
        with wrap_errors(f"pgque {name} failed"):
            async with self._postgres.driver.connection() as conn:
                if conn.autocommit:
                    cursor = await conn.execute(
                        partition_queries()[name], params, prepare=self._postgres.driver.prepare
                    )
                    return list(await cursor.fetchall())
                async with conn.transaction():
                    cursor = await conn.execute(
                        partition_queries()[name], params, prepare=self._postgres.driver.prepare
                    )
                    return list(await cursor.fetchall())

    async def publish(
        self, group_id: str, event: Event, priority: int, dedup: tuple[str, float] | None
    ) -> tuple[int, bool]:
        if dedup is None:
            return await super().publish(group_id, event, priority, None)
        params = {
            "queue": self.queue,
            "group_id": check_group_id(group_id),
            "priority": check_priority(priority),
            "event": check_event(event),
            "dedup_key": dedup[0],
            "ttl": dedup[1],
            "now": self._postgres._now(),
        }
        rows = await self._rows("publish_dedup", params)
        message_id, deduped = rows[0]
        return int(message_id), bool(deduped)

    async def ensure_slots(self, slots: int) -> int:
        params = {"queue": self.queue, "slots": slots, "now": self._postgres._now()}
        return int((await self._rows("partition_slots", params))[0][0])

    async def reset_slots(self) -> bool:
        return bool((await self._rows("partition_reset_slots", {"queue": self.queue}))[0][0])

    def check_concurrency(self, concurrency: int) -> None:
        size = getattr(self._lock_pool, "max_size", None)
        if isinstance(size, int) and size < concurrency:
            raise ConfigurationError(
                f"the Exclusive tier with concurrency={concurrency} holds one lock_pool "
                f"connection per handler, but the lock_pool has max_size={size}: a handler "
                "would time out waiting for one. Size the lock_pool for the concurrency"
            )
        if concurrency > 1 and self._lock_pool is None and self._one_connection():
            raise ConfigurationError(
                f"the Exclusive tier with concurrency={concurrency} needs a database session "
                "per handler, but this transport sits on one injected connection: its "
                "handlers' lock transactions would share it (the advisory lock is re-entrant "
                "within a session), so two of them could hold one key. Pass lock_pool=<a "
                "psycopg pool>, open the transport on a DSN or a pool, or use concurrency=1"
            )

    def claim_lock_session(self, consumer: object) -> None:
        conn = self._postgres.driver.conn
        if self._lock_pool is not None or conn is None:
            return
        with _LOCKING_GUARD:
            users = _SESSION_USERS.setdefault(conn, weakref.WeakSet())
            if any(user is not consumer for user in users):
                raise ConfigurationError(
                    "another Exclusive consumer already takes its key locks on this "
                    "transport's one injected connection: two consumers would share its "
                    "session (the advisory lock is re-entrant within it), so both could hold "
                    "one key. Give each consumer its own transport or a lock_pool, or open the "
                    "transport on a DSN or a pool"
                )
            users.add(consumer)

    def free_lock_session(self, consumer: object) -> None:
        conn = self._postgres.driver.conn
        if conn is None:
            return
        with _LOCKING_GUARD:
            users = _SESSION_USERS.get(conn)
            if users is not None:
                users.discard(consumer)

    def _one_connection(self) -> bool:
        """Tell whether the transport runs everything on one injected connection."""
        return self._postgres.driver.conn is not None

    @asynccontextmanager
    async def _lock_connection(self) -> AsyncIterator[Any]:
        if self._lock_pool is None:
            async with self._postgres.driver.connection() as conn:
                yield conn
        else:
            async with self._lock_pool.connection() as conn:
                yield conn

    @asynccontextmanager
    async def key_lock(self, key: str, ttl: float) -> AsyncIterator[Grant | None]:
        # The lock lives exactly as long as this transaction: COMMIT or ROLLBACK releases it,
        # so a pooler that hands the connection to someone else afterwards hands over nothing.
        self._postgres._check_open()
        async with self._lock_connection() as conn:
            with _sole_lock_transaction(conn):
                async with conn.transaction():
                    with wrap_errors("pgque key lock failed"):
                        cursor = await conn.execute(
                            partition_queries()["try_key_lock"],
                            {"key": key},
                            prepare=self._postgres.driver.prepare,
                        )
                        row = await cursor.fetchone()
                    if row is None or not row[0]:
                        yield None
                        return
                    yield Grant(connection=conn)

    async def purge(self) -> None:
        await self._rows("partition_purge", {"queue": self.queue})


#: id() of every connection inside a key lock's transaction now (each one is alive meanwhile).
_LOCKING: set[int] = set()
_LOCKING_GUARD = threading.Lock()
#: The Exclusive consumers that take key locks on each injected connection's one session
#: (weak both ways: a connection or consumer that is gone frees its place).
_SESSION_USERS: weakref.WeakKeyDictionary[Any, weakref.WeakSet[object]] = (
    weakref.WeakKeyDictionary()
)


@contextmanager
def _sole_lock_transaction(conn: Any) -> Iterator[None]:
    """Mark *conn* as carrying a key lock's transaction for the block.

    A second lock transaction begun on the same connection would be a savepoint of the first,
    and the advisory lock is re-entrant within a session: both would hold their keys. Raises
    ConfigurationError instead, before anything runs on the connection.
    """
    with _LOCKING_GUARD:
        if id(conn) in _LOCKING:
            raise ConfigurationError(
                "a key lock's transaction is already open on this connection: two lock "
                "holders cannot share one session (the advisory lock is re-entrant within "
                "it). Give each consumer its own transport or lock_pool, or use concurrency=1"
            )
        _LOCKING.add(id(conn))
    try:
        yield
    finally:
        with _LOCKING_GUARD:
            _LOCKING.discard(id(conn))
