"""The Redis partition adapter (asyncio API): pgque.partition's dedup window, persisted slot
count and key lock, each one Lua script call (``lua/partition/*.lua``).

Registered in ``pgque.partition_adapters`` for :class:`~pgque.redis.AsyncRedisTransport`.
"""

# The source of its blocking twin, _partition_sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from typing import Any

from redis.exceptions import NoScriptError

from pgque.core.driver import Publication
from pgque.core.partition_base import AsyncPartitionAdapterBase
from pgque.redis._arguments import millis, now_arg
from pgque.redis._async import AsyncRedisTransport
from pgque.redis._errors import raised_as_pgque
from pgque.redis._keys import LOCK_PREFIX
from pgque.redis._scripts import Script, partition_script

__all__ = ["AsyncRedisPartitionAdapter"]


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

    async def publish_dedup(
        self, item: Publication, priority: int, key: str, ttl: float, now: float | None
    ) -> tuple[int, bool]:
        ttls = (millis(ttl), repr(float(ttl)))
        args: list[str | int] = [now_arg(now), priority, item.group_id, item.text, key, *ttls]
        # A script on the queue's keys: the driver's own keys, flags and retries, as a plain
        # publish.
        script = partition_script("publish_dedup")
        reply = await self._redis.run_script(script, args, creates_meta=True)
        return int(reply[0]), bool(int(reply[1]))

    async def ensure_slots(self, slots: int) -> int:
        reply = await self._eval(partition_script("slots"), [self._redis.key_prefix], [slots])
        return int(reply)

    async def reset_slots(self) -> bool:
        reply = await self._eval(partition_script("reset_slots"), [self._redis.key_prefix], [])
        return bool(int(reply))

    async def take_key_lock(self, key: str, token: str, ttl: float) -> int | None:
        lock_key = LOCK_PREFIX + key
        epoch = int(await self._eval(partition_script("lock"), [lock_key], [token, millis(ttl)]))
        return epoch or None

    async def release_key_lock(self, key: str, token: str) -> None:
        await self._eval(partition_script("unlock"), [LOCK_PREFIX + key], [token])

    async def purge(self) -> None:
        await self._eval(partition_script("purge"), [self._redis.key_prefix], [])
