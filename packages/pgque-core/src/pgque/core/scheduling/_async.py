"""The asyncio scheduler: publish each due tick of a schedule, once across all schedulers."""

# The source of its blocking twin, _sync.py (tools/async_to_sync.py): the twin  # async-only
# waits on a threading.Event where this file waits on an asyncio.Event.  # async-only

from __future__ import annotations

import asyncio  # async-only
import contextlib  # async-only
import threading
from collections.abc import Callable

from pgque.core.contract import AsyncSupportsServerTime, AsyncTransport
from pgque.core.errors import ConnectionLost, PgqueError, RetryableConflict
from pgque.core.scheduling._entry import Schedule, ScheduleEntry
from pgque.core.scheduling._logs import log, log_missed, stamp
from pgque.core.scheduling._options import (
    DEFAULT_GRACE_S,
    SchedulerOptions,
    check_schedule,
    check_transport,
    clock_of,
)
from pgque.core.scheduling._ticks import (
    MAX_SLEEP_S,
    PublishedTick,
    check_now,
    first_cursor,
    next_wakeup,
    plan,
)
from pgque.core.worker._options import ERROR_JITTER, RECONNECT_BACKOFF
from pgque.core.worker._policy import Backoff
from pgque.core.worker._signals import watch_signals

__all__ = ["AsyncScheduler"]


class AsyncScheduler:
    """Publish the ticks of *schedule* to *transport*'s queue as they fall due (asyncio).

    Each tick of each entry is published with ``transport.publish_tick``, which appends it
    only if no scheduler published that tick (or a later one) of that entry before: several
    schedulers may run on one queue at once (for high availability) and each tick is still
    published exactly once.

    Time is the transport's injected clock when it has one (tests), else ``time.time()``;
    *clock* overrides both. When it first meets an entry, a scheduler reads the entry's last
    published tick (``last_tick``): the ticks since then that nobody published are *missed*,
    and so are ticks found more than *grace* seconds late while running (after an outage). The
    entry's policy says what happens to them (``skip``: only the latest is published, and
    none when a later tick is on time; ``catch_up``: each one, oldest first, at most the
    entry's ``max_catch_up``). An entry never published before starts with its first tick
    at or after the scheduler's start.

    Options: *grace* (seconds, default 10) how late a tick may be and still count as on time;
    *name* for logs (default host:pid); *reconnect_backoff* ``(first, maximum)`` the wait after
    a lost connection or a conflict, doubling while they go on.

    Raises InvalidInput for an empty or invalid schedule or an option out of range, and
    ConfigurationError for a transport without ``publish_tick``/``last_tick``.
    """

    def __init__(
        self,
        transport: AsyncTransport,
        schedule: Schedule,
        *,
        grace: float = DEFAULT_GRACE_S,
        name: str | None = None,
        clock: Callable[[], float] | None = None,
        reconnect_backoff: tuple[float, float] = RECONNECT_BACKOFF,
    ) -> None:
        check_transport(transport)
        self._schedule = check_schedule(schedule)
        self._options = SchedulerOptions.build(
            name=name, grace=grace, reconnect_backoff=reconnect_backoff
        )
        self._transport = transport
        self._clock = clock_of(transport, clock)
        #: per entry: the latest tick known to be published (by anyone) or given up
        self._cursors: dict[str, float] = {}
        self._lock = threading.Lock()
        self._running = False
        self._stop_requested = False
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None  # async-only

    def __repr__(self) -> str:
        return f"AsyncScheduler(name={self.name!r}, queue={self._transport.queue!r})"

    @property
    def name(self) -> str:
        """The scheduler's name, as it appears in logs."""
        return self._options.name

    @property
    def schedule(self) -> Schedule:
        """The schedule this scheduler publishes."""
        return self._schedule

    @property
    def running(self) -> bool:
        """True while :meth:`run` is running."""
        return self._running

    def now(self) -> float:
        """Return the time the scheduler judges ticks by (epoch seconds)."""
        return float(self._clock())

    async def run_once(self, now: float | None = None) -> list[PublishedTick]:
        """Publish every tick due at *now* (default: :meth:`now`); return those this call
        appended, oldest first per entry (a tick another scheduler published is not listed).

        Raises InvalidInput for a *now* that is not finite epoch seconds, and what the
        transport raises (ConnectionLost, ...); the ticks published before an error stay
        published and are not published again.
        """
        when = self.now() if now is None else check_now(now)
        published: list[PublishedTick] = []
        for entry in self._schedule:
            cursor = await self._cursor(entry, when, told=now is not None)
            todo = plan(entry, cursor, when, self._options.grace)
            if todo.left_out:
                log_missed(self.name, entry, cursor)
            for tick in todo.ticks:
                message_id = await self._transport.publish_tick(
                    entry.name,
                    tick,
                    entry.group_id,
                    entry.event_at(tick),
                    priority=entry.priority,
                    fairness_key=entry.fairness_key,
                )
                self._cursors[entry.name] = tick
                if message_id is None:
                    log.debug(
                        "scheduler %s: tick %s of %s was already published (by another scheduler)",
                        self.name,
                        stamp(tick),
                        entry.name,
                    )
                    continue
                published.append(PublishedTick(entry.name, tick, message_id))
                log.info(
                    "scheduler %s: published tick %s of %s as message %d",
                    self.name,
                    stamp(tick),
                    entry.name,
                    message_id,
                )
        return published

    async def _cursor(self, entry: ScheduleEntry, now: float, *, told: bool = False) -> float:
        cursor = self._cursors.get(entry.name)
        if cursor is None:
            last = await self._transport.last_tick(entry.name)
            start = now if last is not None or told else await self._start_time(now)
            cursor = self._cursors[entry.name] = first_cursor(last, start)
            log.info(
                "scheduler %s: entry %s (%s, %s) last published %s",
                self.name,
                entry.name,
                entry.cron,
                entry.tz,
                "never" if last is None else stamp(last),
            )
        return cursor

    async def _start_time(self, now: float) -> float:
        """Return when a never-published entry starts: by the store's clock when the transport
        can read it (every scheduler then agrees on the entry's first tick, however their own
        clocks disagree), else by this scheduler's *now*."""
        if not isinstance(self._transport, AsyncSupportsServerTime):
            return now
        return await self._transport.server_time()

    def next_wakeup(self, after: float) -> float | None:
        """Return the earliest tick of any entry later than both *after* and what that entry
        already published; None if no entry has one, or one was not read from the transport
        yet."""
        return next_wakeup(self._schedule, self._cursors, after)

    async def run(self, *, install_signal_handlers: bool = True) -> int:
        """Publish due ticks until :meth:`stop` (or SIGINT/SIGTERM) is called; return how many
        ticks this scheduler appended.

        Sleeps until the next tick of any entry (at most 5 s at a time, so a wall clock that
        jumps is noticed). A lost connection or a conflict is logged (one WARNING line per
        failure) and retried with a growing wait; the ticks that fell due meanwhile follow
        the missed-tick policy. With *install_signal_handlers* (main thread only), SIGINT
        and SIGTERM stop it; the previous handlers are restored. Raises PgqueError if this
        scheduler is already running, and what the transport raises beyond lost connections
        and conflicts (TransportClosed, ...).
        """
        with self._lock:
            if self._running:
                raise PgqueError(f"scheduler {self.name} is already running")
            self._running = True
            self._loop = asyncio.get_running_loop()  # async-only
            self._wake = asyncio.Event()
            if self._stop_requested:
                self._wake.set()
        undo: Callable[[], None] = _nothing
        if install_signal_handlers:
            undo = watch_signals(self._on_signal, asyncio.get_running_loop())  # async-only
            # sync: undo = watch_signals(self._on_signal)
        backoff = Backoff(*self._options.reconnect_backoff, jitter=ERROR_JITTER)
        log.info(
            "scheduler %s started on queue %s (%d entries)",
            self.name,
            self._transport.queue,
            len(self._schedule),
        )
        published = 0
        try:
            while not self._stop_requested:
                when = self.now()
                try:
                    published += len(await self.run_once(when))
                except (ConnectionLost, RetryableConflict) as exc:
                    wait = backoff.next()
                    log.warning(
                        "scheduler %s: publishing ticks failed (%s: %s); retrying in %.1f s",
                        self.name,
                        type(exc).__name__,
                        exc,
                        wait,
                    )
                    await self._pause(wait)
                    continue
                backoff.reset()
                tick = self.next_wakeup(when)
                wait = MAX_SLEEP_S if tick is None else tick - self.now()
                await self._pause(min(wait, MAX_SLEEP_S))
        finally:
            undo()
            with self._lock:
                self._running = False
                self._stop_requested = False
                self._loop = None  # async-only
            log.info("scheduler %s stopped (%d ticks published)", self.name, published)
        return published

    def stop(self) -> None:
        """Ask :meth:`run` to return (at once: a sleeping scheduler wakes); callable from any
        thread. Before :meth:`run`, makes the next run return at once."""
        with self._lock:
            self._stop_requested = True
            loop = self._loop  # async-only
        if loop is not None and not loop.is_closed():  # async-only
            loop.call_soon_threadsafe(self._wake.set)  # async-only
        # sync: self._wake.set()

    def _on_signal(self, signum: int) -> None:
        log.warning("scheduler %s: received signal %d, stopping", self.name, signum)
        self.stop()

    async def _pause(self, seconds: float) -> None:
        """Wait *seconds*, or less when :meth:`stop` is called."""
        if seconds <= 0:
            return
        with contextlib.suppress(asyncio.TimeoutError):  # async-only
            await asyncio.wait_for(self._wake.wait(), seconds)  # async-only
        # sync: self._wake.wait(seconds)


def _nothing() -> None:
    return None
