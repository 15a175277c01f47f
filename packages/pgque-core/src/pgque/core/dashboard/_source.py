"""Where the dashboard reads its queues: transports given by the caller, or opened from a URL.

Also keeps the periodic stats samples the queues page draws its chart from.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pgque.core.contract import AsyncSupportsQueues, AsyncTransport
from pgque.core.models import QueueStats
from pgque.core.registry import backends, connect_async
from pgque.core.urls import parse_url

__all__ = ["QueueSource", "Sample", "SAMPLE_INTERVAL_S", "SAMPLES_KEPT", "COMMAND_WAIT_S"]

#: Seconds between two kept stats samples of one queue (reads in between keep none).
SAMPLE_INTERVAL_S = 5.0
#: Samples kept per queue: 10 minutes at the default interval.
SAMPLES_KEPT = 120
#: How long a transport the dashboard opens waits for a server that is still starting.
COMMAND_WAIT_S = 10.0


@dataclass(frozen=True)
class Sample:
    """One queue's counts at one moment (epoch seconds, this process's clock)."""

    at: float
    messages: int
    in_flight: int


class UnknownQueue(LookupError):
    """The dashboard does not show a queue of that name."""


class QueueSource:
    """The queues the dashboard shows and one asyncio transport per queue.

    Built from *transports* (the caller owns and closes them) or from *url* (the source opens
    one transport per queue on first use, lists the server's queues with ``queues()`` where the
    backend can, and closes what it opened in :meth:`aclose`).
    """

    def __init__(
        self,
        url: str | None = None,
        transports: Sequence[AsyncTransport] | None = None,
        *,
        sample_interval: float = SAMPLE_INTERVAL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if (url is None) == (transports is None):
            raise ValueError("pass exactly one of url= and transports=")
        self._url = url
        self._owned: dict[str, AsyncTransport] = {}
        self._given: dict[str, AsyncTransport] = {}
        for transport in transports or ():
            self._given[transport.queue] = transport
        self._default_queue = "default"
        self._options: dict[str, object] = {}
        if url is not None:
            parsed = parse_url(url)
            self._default_queue = str(parsed.options.get("queue") or "default")
            # As the command line does: wait a little for a starting server, fail at once when
            # nothing listens (a page answers with the error instead of hanging).
            for backend in backends(parsed.scheme):
                if backend.command_options is not None:
                    extra = backend.command_options(COMMAND_WAIT_S, True)
                    self._options = {k: v for k, v in extra.items() if k not in parsed.options}
                    break
        self._lock = asyncio.Lock()
        self._sample_interval = sample_interval
        self._clock = clock
        self._samples: dict[str, deque[Sample]] = {}
        self._known: set[str] = set(self._given)

    async def _root(self) -> AsyncTransport:
        if self._given:
            return next(iter(self._given.values()))
        return await self.transport(self._default_queue, check=False)

    async def queue_names(self) -> list[str]:
        """Return the queues to show, sorted: those given, or the server's (``queues()``).

        A queue shown once stays listed (at zero when it empties); a backend that cannot list
        its queues shows the URL's queue only. Raises PgqueError.
        """
        if self._given:
            names = set(self._given)
        else:
            root = await self._root()
            names = {self._default_queue}
            if isinstance(root, AsyncSupportsQueues) and root.capabilities.queues:
                names.update(str(name) for name in await root.queues())
        # A queue drained to nothing drops out of queues(); the page keeps showing it (at zero)
        # for as long as this dashboard runs, so a finished drain reads as 0, not as a gap.
        self._known |= names
        return sorted(self._known)

    async def transport(self, queue: str, *, check: bool = True) -> AsyncTransport:
        """Return the transport of *queue*; raises UnknownQueue for a queue not shown."""
        if queue in self._given:
            return self._given[queue]
        if self._url is None:
            raise UnknownQueue(queue)
        if check and queue not in self._known:
            await self.queue_names()
            if queue not in self._known:
                raise UnknownQueue(queue)
        async with self._lock:
            transport = self._owned.get(queue)
            if transport is None:
                transport = connect_async(self._url, queue=queue, **self._options)
                self._owned[queue] = transport
        return transport

    async def stats(self, queue: str) -> QueueStats:
        """Return *queue*'s stats and keep them as a sample when the last one is old enough."""
        snapshot = await (await self.transport(queue)).stats()
        self.record(queue, snapshot)
        return snapshot

    def record(self, queue: str, stats: QueueStats) -> None:
        """Keep *stats* of *queue* as a sample, at most one per sample interval."""
        kept = self._samples.setdefault(queue, deque(maxlen=SAMPLES_KEPT))
        now = self._clock()
        if kept and now - kept[-1].at < self._sample_interval:
            return
        kept.append(Sample(at=now, messages=stats.messages, in_flight=stats.in_flight))

    def samples(self, queue: str) -> list[Sample]:
        """Return the samples kept for *queue*, oldest first."""
        return list(self._samples.get(queue, ()))

    async def aclose(self) -> None:
        """Close the transports this source opened (never those it was given)."""
        owned, self._owned = self._owned, {}
        for transport in owned.values():
            await transport.close()
