"""Waiting on several blocking shards at once (the blocking sharded transport's wake-ups)."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Sequence

from pgque.core.contract import SupportsWakeups
from pgque.core.errors import TransportClosed
from pgque.sharding._merging import merge_waits

__all__ = ["ThreadedWaits"]


class ThreadedWaits:
    """Run each shard's ``wait_for_messages`` in a thread of its own, and wait for the first.

    A blocking wait cannot be cancelled, so a shard's wait that is still running when
    :meth:`wait` returns is kept and counted by the next :meth:`wait` (never two waits on one
    shard at once). Its threads end by themselves at their timeout; :meth:`close` stops
    handing out new ones.
    """

    def __init__(self, count: int) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=count, thread_name_prefix="pgque-shard-wait"
        )
        self._running: dict[int, concurrent.futures.Future[bool]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def wait(self, shards: Sequence[tuple[int, SupportsWakeups]], timeout: float) -> bool:
        """Wait up to *timeout* seconds on every shard; True as soon as one says True (errors
        count as :func:`~pgque.sharding._merging.merge_waits` says)."""
        with self._lock:
            if self._closed:
                raise TransportClosed()
            futures: list[concurrent.futures.Future[bool]] = []
            for index, shard in shards:
                running = self._running.get(index)
                if running is not None and running.done():
                    # An old wait that timed out or failed is made anew; one that woke counts.
                    woke = running.exception() is None and running.result()
                    running = running if woke else None
                if running is None:
                    running = self._pool.submit(shard.wait_for_messages, timeout)
                    self._running[index] = running
                futures.append(running)
        deadline = time.monotonic() + timeout
        errors: list[BaseException] = []
        woken = False
        pending = set(futures)
        while pending and not woken:
            left = deadline - time.monotonic()
            done, pending = concurrent.futures.wait(
                pending,
                timeout=max(left, 0.0) + 1.0,
                return_when=concurrent.futures.FIRST_COMPLETED,
            )
            if not done:
                break
            for future in done:
                error = future.exception()
                if error is not None:
                    errors.append(error)
                elif future.result():
                    woken = True
        with self._lock:  # a wait still running is kept for the next call
            self._running = {k: f for k, f in self._running.items() if not f.done()}
        return merge_waits(woken, errors, len(futures))

    def close(self) -> None:
        """Hand out no more waits; running ones end at their own timeout. Idempotent."""
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
