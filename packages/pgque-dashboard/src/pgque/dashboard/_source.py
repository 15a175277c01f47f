"""Where the dashboard reads its queues: transports given by the caller, or opened from a URL.

``stats()`` counts every group of a queue (about a second at 1,000,000 groups on PostgreSQL),
so pages never wait for it: a refresher task reads every shown queue's counts once per sample
interval while someone is looking (it stops after a minute without a request), however many
pages poll, and pages show the latest counts with their age. Each read is also a sample of
the throughput chart.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from pgque.core.contract import (
    AsyncSupportsHistory,
    AsyncSupportsQueues,
    AsyncSupportsWorkers,
    AsyncTransport,
    Transport,
)
from pgque.core.errors import PgqueError
from pgque.core.models import Capabilities, QueueStats
from pgque.core.registry import KNOWN_SCHEMES, Backend, backends, connect, connect_async
from pgque.core.urls import parse_url

__all__ = [
    "QueueSource",
    "ThreadedTransport",
    "missing_async_package",
    "Sample",
    "UnknownQueue",
    "SAMPLE_INTERVAL_S",
    "SAMPLES_KEPT",
    "IDLE_AFTER_S",
    "COMMAND_WAIT_S",
]

#: Seconds between two reads of every queue's counts by the refresher (each one a sample).
SAMPLE_INTERVAL_S = 3.0
#: Samples kept per queue: 10 minutes at the default interval.
SAMPLES_KEPT = 200
#: The refresher stops after this many seconds without a request (and starts again on one).
IDLE_AFTER_S = 60.0
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


class ThreadedTransport:
    """An asyncio face on a blocking transport: each call runs in a worker thread
    (``asyncio.to_thread``), so the event loop never waits for the server.

    The dashboard reads through it when a backend has no asyncio transport installed
    (pgque-postgres without pgque-postgres-async). The two protocols have the same members,
    so every method of the blocking transport is offered, as a coroutine function.
    """

    def __init__(self, transport: Transport) -> None:
        self._transport = transport

    @property
    def queue(self) -> str:
        """The queue name of the blocking transport."""
        return self._transport.queue

    @property
    def capabilities(self) -> Capabilities:
        """What the blocking transport supports."""
        return self._transport.capabilities

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        member = getattr(self._transport, name)
        if not callable(member):
            return member

        async def in_a_thread(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(member, *args, **kwargs)

        in_a_thread.__name__ = name
        in_a_thread.__doc__ = getattr(member, "__doc__", None)
        return in_a_thread

    async def close(self) -> None:
        """Close the blocking transport (in a thread)."""
        await asyncio.to_thread(self._transport.close)


def _chosen(scheme: str) -> tuple[Backend | None, bool]:
    """The backend that serves *scheme* for the dashboard, and whether it is a blocking one
    served in threads (no asyncio transport installed). Raises ConfigurationError."""
    found = backends(scheme)
    for backend in found:
        if backend.open_async is not None:
            return backend, False
    for backend in found:
        if backend.open is not None:
            return backend, True
    return None, False


def missing_async_package(url: str) -> str | None:
    """Return the distribution whose asyncio transport *url* lacks, when the dashboard reads
    it through the blocking transport in threads instead; None when it does not.

    Raises ConfigurationError when a backend of the URL's scheme fails to import.
    """
    scheme = parse_url(url).scheme
    _backend, threaded = _chosen(scheme)
    if not threaded:
        return None
    return KNOWN_SCHEMES.get(scheme, ("", f"the asyncio transport of {scheme}://"))[1]


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
        #: The queue the URL names (``?queue=``): shown even before it holds anything.
        self._named_queue: str | None = None
        self._options: dict[str, object] = {}
        #: True when no asyncio transport serves the URL: blocking ones are used in threads.
        self.threaded = False
        if url is not None:
            parsed = parse_url(url)
            named = parsed.options.get("queue")
            if named:
                self._named_queue = self._default_queue = str(named)
            backend, self.threaded = _chosen(parsed.scheme)
            # As the command line does: wait a little for a starting server, fail at once when
            # nothing listens (a page answers with the error instead of hanging).
            if backend is not None and backend.command_options is not None:
                extra = backend.command_options(COMMAND_WAIT_S, True)
                self._options = {k: v for k, v in extra.items() if k not in parsed.options}
        self._lock = asyncio.Lock()
        self._sample_interval = sample_interval
        self._clock = clock
        self._samples: dict[str, deque[Sample]] = {}
        self._last: dict[str, tuple[float, QueueStats]] = {}
        self._known: set[str] = set(self._given)
        self._listed = False
        self._refresher: asyncio.Task[None] | None = None
        self._refresher_loop: asyncio.AbstractEventLoop | None = None
        self._last_request = 0.0
        #: The last refresh's failure (one line), or None when it worked.
        self.refresh_error: str | None = None

    @property
    def sample_interval(self) -> float:
        """Seconds between two reads of the counts by the refresher."""
        return self._sample_interval

    async def _root(self) -> AsyncTransport:
        if self._given:
            return next(iter(self._given.values()))
        return await self.transport(self._default_queue, check=False)

    async def queue_names(self) -> list[str]:
        """Return the queues to show, sorted: those given, or the server's (``queues()``) and
        the queue the URL names, if it names one.

        Only queues that exist there are shown: the transport this source opens to list them
        (on the URL's queue, ``default`` when it names none) is not one. A queue shown once
        stays listed (at zero when it empties); a backend that cannot list its queues shows
        the URL's queue only. Raises PgqueError.
        """
        if self._given:
            names = set(self._given)
        else:
            root = await self._root()
            names = set() if self._named_queue is None else {self._named_queue}
            if isinstance(root, AsyncSupportsQueues) and root.capabilities.queues:
                names.update(str(name) for name in await root.queues())
            else:
                names.add(self._default_queue)
        # A queue drained to nothing drops out of queues(); the page keeps showing it (at zero)
        # for as long as this dashboard runs, so a finished drain reads as 0, not as a gap.
        self._known |= names
        self._listed = True
        return sorted(self._known)

    def _touch(self) -> None:
        """Note a request; start the refresher in this event loop if it is not running."""
        self._last_request = time.monotonic()
        loop = asyncio.get_running_loop()
        running = self._refresher is not None and not self._refresher.done()
        if not running or self._refresher_loop is not loop:
            self._refresher = loop.create_task(self._refresh())
            self._refresher_loop = loop

    async def _refresh(self) -> None:
        while time.monotonic() - self._last_request < IDLE_AFTER_S:
            await asyncio.sleep(self._sample_interval)
            try:
                names = await self.queue_names()
            except PgqueError as exc:
                self.refresh_error = str(exc)
                continue
            failed: str | None = None
            for name in names:
                # One queue that cannot be read (a name no queue may have, stored by an older
                # version or by hand) stops neither the reads of the others nor the pages.
                try:
                    await self.stats(name)
                except PgqueError as exc:
                    # A queue never read is shown as unreadable on its own row; the note of a
                    # failed read is about counts the pages still show, grown old.
                    if failed is None and name in self._last:
                        failed = f"{name}: {exc}"
            self.refresh_error = failed

    async def shown_queues(self) -> list[str]:
        """Return the queues to show as the refresher last listed them (listing them now the
        first time). Raises PgqueError."""
        self._touch()
        if not self._listed:
            return await self.queue_names()
        return sorted(self._known)

    async def counts(self, queue: str) -> tuple[QueueStats, float]:
        """Return *queue*'s latest counts and when they were read (this process's clock).

        The refresher's when it has some, else read now. Raises UnknownQueue, PgqueError.
        """
        self._touch()
        last = self._last.get(queue)
        if last is None:
            await self.stats(queue)
            last = self._last[queue]
        return last[1], last[0]

    async def transport(self, queue: str, *, check: bool = True) -> AsyncTransport:
        """Return the transport of *queue*; raises UnknownQueue for a queue not shown."""
        if queue in self._given:
            return self._given[queue]
        if self._url is None:
            raise UnknownQueue(queue)
        if check and queue not in self._known:
            await self.queue_names()
            if queue not in self._known and not await self._has_traces(queue):
                raise UnknownQueue(queue)
        async with self._lock:
            transport = self._owned.get(queue)
            if transport is None:
                transport = await self._open(self._url, queue)
                self._owned[queue] = transport
        return transport

    async def _has_traces(self, queue: str) -> bool:
        """Whether *queue*, not listed by ``queues()`` (it holds no message, dead letter or
        scheduled message), has history records or live workers: a queue that drained to
        nothing before this dashboard first listed it. Such a queue is shown from then on; a
        transport opened to look and finding neither is closed again."""
        assert self._url is not None
        async with self._lock:
            transport = self._owned.get(queue)
            opened = transport is None
            if transport is None:
                transport = await self._open(self._url, queue)
        found = False
        try:
            features = transport.capabilities
            if features.history and isinstance(transport, AsyncSupportsHistory):
                found = bool(await transport.history(limit=1))
            if not found and features.workers and isinstance(transport, AsyncSupportsWorkers):
                found = bool(await transport.workers(include_gone=False))
        finally:
            if not found and opened:
                await transport.close()
        if found:
            async with self._lock:
                if opened and queue in self._owned:
                    await transport.close()  # another request opened one meanwhile
                else:
                    self._owned.setdefault(queue, transport)
            self._known.add(queue)
        return found

    async def _open(self, url: str, queue: str) -> AsyncTransport:
        if not self.threaded:
            return connect_async(url, queue=queue, **self._options)
        # A blocking transport connects as it opens: in a thread too.
        blocking = await asyncio.to_thread(connect, url, queue=queue, **self._options)
        return cast(AsyncTransport, ThreadedTransport(blocking))

    async def stats(self, queue: str) -> QueueStats:
        """Return *queue*'s stats and keep them as a sample when the last one is old enough."""
        snapshot = await (await self.transport(queue)).stats()
        self.record(queue, snapshot)
        return snapshot

    def record(self, queue: str, stats: QueueStats) -> None:
        """Keep *stats* of *queue* as a sample, at most one per sample interval."""
        kept = self._samples.setdefault(queue, deque(maxlen=SAMPLES_KEPT))
        now = self._clock()
        self._last[queue] = (now, stats)
        if kept and now - kept[-1].at < self._sample_interval:
            return
        kept.append(Sample(at=now, messages=stats.messages, in_flight=stats.in_flight))

    def samples(self, queue: str) -> list[Sample]:
        """Return the samples kept for *queue*, oldest first."""
        return list(self._samples.get(queue, ()))

    async def aclose(self) -> None:
        """Close the transports this source opened (never those it was given)."""
        refresher, self._refresher = self._refresher, None
        if refresher is not None and self._refresher_loop is asyncio.get_running_loop():
            refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await refresher
        owned, self._owned = self._owned, {}
        for transport in owned.values():
            await transport.close()
