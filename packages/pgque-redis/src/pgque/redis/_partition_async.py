"""The Redis partition adapter (asyncio API): pgque.partition's dedup window, persisted slot
count and key lock, each one Lua script call (``lua/partition/*.lua``).

Registered in ``pgque.partition_adapters`` for :class:`~pgque.redis.AsyncRedisTransport`.
"""

# The source of its blocking twin, _partition_sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from redis.exceptions import NoScriptError

from pgque.core.errors import PgqueError
from pgque.core.models import Event
from pgque.core.partition_base import AsyncPartitionAdapterBase, Grant
from pgque.core.validation import check_event, check_group_id, check_priority
from pgque.redis._arguments import now_arg
from pgque.redis._async import AsyncRedisTransport
from pgque.redis._errors import raised_as_pgque
from pgque.redis._partition_locks import LOCK_PREFIX, millis
from pgque.redis._scripts import Script, partition_script

__all__ = ["AsyncRedisPartitionAdapter"]

log = logging.getLogger("pgque.partition")


class AsyncRedisPartitionAdapter(AsyncPartitionAdapterBase):
    """The partition adapter of :class:`AsyncRedisTransport`: a dedup window kept under the
    queue's prefix, the slot count in one key, and fenced per-key locks (``SET NX PX`` with a
    token; the epoch is the server's time of the grant)."""

    name = "redis"
    key_locks = True

    def __init__(self, transport: AsyncRedisTransport, *, lock_pool: Any = None) -> None:
        super().__init__(transport, lock_pool=lock_pool)
        self._redis = transport.driver

    async def _eval(self, script: Script, keys: list[str], args: list[Any]) -> Any:
        client = self._redis.client
        with raised_as_pgque(self._redis.options.masked_url, sent=None):
            try:
                return await client.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                # Forgotten (SCRIPT FLUSH, a restart): EVAL reruns and caches it in one call.
                return await client.eval(script.text, len(keys), *keys, *args)

    async def publish(
        self, group_id: str, event: Event, priority: int, dedup: tuple[str, float] | None
    ) -> tuple[int, bool]:
        if dedup is None:
            return await super().publish(group_id, event, priority, None)
        group_id = check_group_id(group_id)
        priority = check_priority(priority)
        body = check_event(event)
        key, ttl = dedup
        now = now_arg(self.transport._now())
        args: list[str | int] = [now, priority, group_id, body, key, millis(ttl), repr(float(ttl))]
        script = partition_script("publish_dedup")
        # A script on the queue's keys: the driver's own keys, flags and retries, as a plain
        # publish.
        reply = await self._redis.run_script(script, args, creates_meta=True)
        return int(reply[0]), bool(int(reply[1]))

    async def ensure_slots(self, slots: int) -> int:
        reply = await self._eval(partition_script("slots"), [self._redis.key_prefix], [slots])
        return int(reply)

    async def reset_slots(self) -> bool:
        reply = await self._eval(partition_script("reset_slots"), [self._redis.key_prefix], [])
        return bool(int(reply))

    @asynccontextmanager
    async def key_lock(self, key: str, ttl: float) -> AsyncIterator[Grant | None]:
        token = uuid.uuid4().hex
        lock_key = LOCK_PREFIX + key
        epoch = int(await self._eval(partition_script("lock"), [lock_key], [token, millis(ttl)]))
        if not epoch:
            yield None
            return
        try:
            yield Grant(epoch=epoch)
        finally:
            try:
                await self._eval(partition_script("unlock"), [lock_key], [token])
            except PgqueError as exc:
                # The block has run; failing now would make the worker run the handler again.
                # The lock ends with its TTL, and exclusion holds meanwhile.
                log.warning(
                    "could not release the lock of key %r (it expires with its TTL): %s", key, exc
                )

    async def purge(self) -> None:
        await self._eval(partition_script("purge"), [self._redis.key_prefix], [])
