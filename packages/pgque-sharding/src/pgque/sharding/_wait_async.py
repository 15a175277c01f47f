"""Waiting on several asyncio shards at once (the async sharded transport's wake-ups)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from pgque.core.contract import AsyncSupportsWakeups
from pgque.sharding._merging import merge_waits

__all__ = ["wait_any"]


async def wait_any(shards: Sequence[AsyncSupportsWakeups], timeout: float) -> bool:
    """Wait on every shard's ``wait_for_messages`` at once; True as soon as one says True.

    The waits still running are cancelled (and awaited) before this returns; errors count as
    :func:`~pgque.sharding._merging.merge_waits` says.
    """
    tasks = [asyncio.ensure_future(shard.wait_for_messages(timeout)) for shard in shards]
    deadline = time.monotonic() + timeout
    errors: list[BaseException] = []
    woken = False
    pending = set(tasks)
    try:
        while pending and not woken:
            left = deadline - time.monotonic()
            # Each wait ends by itself at the timeout; the margin only guards a stuck one.
            done, pending = await asyncio.wait(
                pending, timeout=max(left, 0.0) + 1.0, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                break
            for task in done:
                error = task.exception()
                if error is not None:
                    errors.append(error)
                elif task.result():
                    woken = True
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    return merge_waits(woken, errors, len(tasks))
