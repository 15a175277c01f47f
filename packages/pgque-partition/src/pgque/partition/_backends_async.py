"""What the partition layer needs from each backend (asyncio API): an atomic deduplicated
publish, the persisted slot count, and the Exclusive tier's per-key lock.

Each transport of this project gets the best its store offers: PostgreSQL a server-side
function and a transaction-scoped advisory lock, Redis a Lua script and a fenced ``SET NX PX``,
memory the store's own lock. Another transport gets plain publishes only.
"""

# The source of its blocking twin, _backends_sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import logging
import math
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

from pgque.core.contract import AsyncTransport
from pgque.core.errors import ConfigurationError, PgqueError
from pgque.core.memory import AsyncInMemoryTransport
from pgque.core.models import Event
from pgque.core.validation import check_event, check_group_id, check_priority
from pgque.partition._memory import state_of
from pgque.partition._resources import Script, lua_script, sql_queries

__all__ = ["Grant", "AsyncPartitionBackend", "partition_backend", "LOCK_PREFIX"]

log = logging.getLogger("pgque.partition")

#: Redis: the key of a partition key's lock is this prefix and the key.
LOCK_PREFIX = "pgque:lock:"


@dataclass(frozen=True)
class Grant:
    """A held key lock: its fencing epoch (Redis, memory) or its transaction's connection."""

    epoch: int | None = None
    connection: Any = None


class AsyncPartitionBackend:
    """The portable fallback: plain publishes; no dedup, persisted slots or key locks."""

    name = "generic"

    def __init__(self, transport: AsyncTransport) -> None:
        self._transport: Any = transport

    @property
    def queue(self) -> str:
        """The transport's queue."""
        return str(self._transport.queue)

    async def publish(
        self, group_id: str, event: Event, priority: int, dedup: tuple[str, float] | None
    ) -> tuple[int, bool]:
        """Append *event*, unless *dedup* (key, ttl) names a publish within its window.

        Returns (message id, deduplicated). Raises ConfigurationError when dedup is asked of a
        transport that cannot make it atomic.
        """
        if dedup is not None:
            raise ConfigurationError(f"{type(self._transport).__name__} has no dedup window")
        return await self._transport.publish(group_id, event, priority=priority), False

    async def ensure_slots(self, slots: int) -> int:
        """Persist *slots* as the queue's slot count unless it has one; return the one in force."""
        raise ConfigurationError(
            f"{type(self._transport).__name__} cannot persist a slot count; use Ordered()"
        )

    async def reset_slots(self) -> bool:
        """Forget the slot count of a drained queue; False if it has messages or no count."""
        raise ConfigurationError(f"{type(self._transport).__name__} keeps no slot count")

    @asynccontextmanager
    async def key_lock(self, key: str, ttl: float) -> AsyncIterator[Grant | None]:
        """Hold *key*'s lock for the block (None: another worker holds it)."""
        yield self._no_lock()

    def check_concurrency(self, concurrency: int) -> None:
        """Refuse *concurrency* lock holders at once where they would share one lock session.

        Raises ConfigurationError (PostgreSQL on one injected connection without a lock pool).
        """

    def _no_lock(self) -> Grant | None:
        raise ConfigurationError(
            f"{type(self._transport).__name__} has no key lock; use the Ordered tier"
        )

    async def purge(self) -> None:
        """Forget the queue's dedup keys and slot count (tests, operators)."""


class _AsyncMemoryBackend(AsyncPartitionBackend):
    name = "memory"

    def __init__(self, transport: AsyncInMemoryTransport) -> None:
        super().__init__(transport)
        self._store = transport.store
        self._state = state_of(transport.store)

    async def publish(
        self, group_id: str, event: Event, priority: int, dedup: tuple[str, float] | None
    ) -> tuple[int, bool]:
        if dedup is None:
            return await super().publish(group_id, event, priority, None)
        self._transport._check_open()
        group_id = check_group_id(group_id)
        priority = check_priority(priority)
        text = check_event(event)
        key, ttl = dedup
        queue = self.queue
        with self._store.lock:
            now = self._transport._now()
            self._state.reap(queue, now)
            first = self._state.seen(queue, key, now)
            if first is not None:
                return first, True
            message_id = self._store.model(queue).publish(group_id, text, priority, now)
            self._state.remember(queue, key, message_id, now + ttl)
            return message_id, False

    async def ensure_slots(self, slots: int) -> int:
        with self._store.lock:
            return self._state.slots.setdefault(self.queue, slots)

    async def reset_slots(self) -> bool:
        with self._store.lock:
            if self._store.model(self.queue).groups:
                return False
            return self._state.slots.pop(self.queue, None) is not None

    @asynccontextmanager
    async def key_lock(self, key: str, ttl: float) -> AsyncIterator[Grant | None]:
        taken = self._state.try_lock(key, ttl)
        if taken is None:
            yield None
            return
        token, epoch = taken
        try:
            yield Grant(epoch=epoch)
        finally:
            self._state.unlock(key, token)

    async def purge(self) -> None:
        with self._store.lock:
            self._state.slots.pop(self.queue, None)
            self._state.dedup.pop(self.queue, None)


class _AsyncPostgresBackend(AsyncPartitionBackend):
    name = "postgresql"

    def __init__(self, transport: AsyncTransport, lock_pool: Any = None) -> None:
        super().__init__(transport)
        self._lock_pool = lock_pool

    async def _rows(self, name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        from pgque.postgres_async._errors import wrap_errors

        self._transport._check_open()
        with wrap_errors(f"pgque {name} failed"):
            async with self._transport._connection() as conn:
                if conn.autocommit:
                    cursor = await conn.execute(sql_queries()[name], params)
                    return list(await cursor.fetchall())
                async with conn.transaction():
                    cursor = await conn.execute(sql_queries()[name], params)
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
            "now": self._transport._now(),
        }
        rows = await self._rows("publish_dedup", params)
        message_id, deduped = rows[0]
        return int(message_id), bool(deduped)

    async def ensure_slots(self, slots: int) -> int:
        params = {"queue": self.queue, "slots": slots, "now": self._transport._now()}
        return int((await self._rows("partition_slots", params))[0][0])

    async def reset_slots(self) -> bool:
        return bool((await self._rows("partition_reset_slots", {"queue": self.queue}))[0][0])

    def check_concurrency(self, concurrency: int) -> None:
        if concurrency > 1 and self._lock_pool is None and self._one_connection():
            raise ConfigurationError(
                f"the Exclusive tier with concurrency={concurrency} needs a database session "
                "per handler, but this transport sits on one injected connection: its "
                "handlers' lock transactions would share it (the advisory lock is re-entrant "
                "within a session), so two of them could hold one key. Pass lock_pool=<a "
                "psycopg pool>, open the transport on a DSN or a pool, or use concurrency=1"
            )

    def _one_connection(self) -> bool:
        """Tell whether the transport runs everything on one injected connection."""
        return getattr(self._transport, "_conn", None) is not None

    @asynccontextmanager
    async def _lock_connection(self) -> AsyncIterator[Any]:
        if self._lock_pool is None:
            async with self._transport._connection() as conn:
                yield conn
        else:
            async with self._lock_pool.connection() as conn:
                yield conn

    @asynccontextmanager
    async def key_lock(self, key: str, ttl: float) -> AsyncIterator[Grant | None]:
        # The lock lives exactly as long as this transaction: COMMIT or ROLLBACK releases it,
        # so a pooler that hands the connection to someone else afterwards hands over nothing.
        from pgque.postgres_async._errors import wrap_errors

        self._transport._check_open()
        async with self._lock_connection() as conn:
            with _sole_lock_transaction(conn):
                async with conn.transaction():
                    with wrap_errors("pgque key lock failed"):
                        cursor = await conn.execute(sql_queries()["try_key_lock"], {"key": key})
                        row = await cursor.fetchone()
                    if row is None or not row[0]:
                        yield None
                        return
                    yield Grant(connection=conn)

    async def purge(self) -> None:
        await self._rows("partition_purge", {"queue": self.queue})


class _AsyncRedisBackend(AsyncPartitionBackend):
    name = "redis"

    def __init__(self, transport: AsyncTransport) -> None:
        super().__init__(transport)
        options = self._transport._options
        self._masked = str(getattr(options, "masked_url", "redis"))

    async def _eval(self, script: Script, keys: list[str], args: list[Any]) -> Any:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import NoScriptError, RedisError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        from pgque.redis._common import connection_lost, nothing_sent, wrap_error

        client = self._transport.client
        try:
            try:
                return await client.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                await client.script_load(script.text)
                return await client.evalsha(script.sha, len(keys), *keys, *args)
        except (RedisConnectionError, RedisTimeoutError) as exc:
            raise connection_lost(exc, self._masked, not nothing_sent(exc)) from exc
        except RedisError as exc:
            raise wrap_error(exc, self._masked) from exc

    def _now(self) -> str:
        from pgque.redis._common import now_arg

        return now_arg(self._transport._options.common.clock)

    async def publish(
        self, group_id: str, event: Event, priority: int, dedup: tuple[str, float] | None
    ) -> tuple[int, bool]:
        if dedup is None:
            return await super().publish(group_id, event, priority, None)
        group_id = check_group_id(group_id)
        priority = check_priority(priority)
        body = check_event(event)
        key, ttl = dedup
        args = [self._now(), priority, group_id, body, key, _millis(ttl), repr(float(ttl))]
        script = lua_script("publish_dedup", with_common=True)
        reply = await self._eval(script, [self._transport.key_prefix], args)
        return int(reply[0]), bool(int(reply[1]))

    async def ensure_slots(self, slots: int) -> int:
        reply = await self._eval(lua_script("slots"), [self._transport.key_prefix], [slots])
        return int(reply)

    async def reset_slots(self) -> bool:
        reply = await self._eval(lua_script("reset_slots"), [self._transport.key_prefix], [])
        return bool(int(reply))

    @asynccontextmanager
    async def key_lock(self, key: str, ttl: float) -> AsyncIterator[Grant | None]:
        token = uuid.uuid4().hex
        lock_key = LOCK_PREFIX + key
        epoch = int(await self._eval(lua_script("lock"), [lock_key], [token, _millis(ttl)]))
        if not epoch:
            yield None
            return
        try:
            yield Grant(epoch=epoch)
        finally:
            try:
                await self._eval(lua_script("unlock"), [lock_key], [token])
            except PgqueError as exc:
                # The block has run; failing now would make the worker run the handler again.
                # The lock ends with its TTL, and exclusion holds meanwhile.
                log.warning(
                    "could not release the lock of key %r (it expires with its TTL): %s", key, exc
                )

    async def purge(self) -> None:
        await self._eval(lua_script("purge"), [self._transport.key_prefix], [])


#: id() of every connection inside a key lock's transaction now (each one is alive meanwhile).
_LOCKING: set[int] = set()
_LOCKING_GUARD = threading.Lock()


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


def _millis(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


def partition_backend(transport: AsyncTransport, *, lock_pool: Any = None) -> AsyncPartitionBackend:
    """Return the partition backend of *transport* (memory, PostgreSQL, Redis or generic).

    *lock_pool* (PostgreSQL): a psycopg pool for the Exclusive tier's lock transactions;
    default: the transport's own pool.
    """
    if isinstance(transport, AsyncInMemoryTransport):
        return _AsyncMemoryBackend(transport)
    module = type(transport).__module__
    if module.startswith("pgque.postgres"):
        return _AsyncPostgresBackend(transport, lock_pool)
    if module.startswith("pgque.redis"):
        return _AsyncRedisBackend(transport)
    return AsyncPartitionBackend(transport)
