"""The asyncio worker: runs a handler on the messages of one queue, safely.

The worker loop composes the worker's three parts, whose data flows one way: *claiming* fills
the slots with leases (a buffer, round trips), *running* runs the handler on each lease and
turns how it ended into a settlement, *settling* keeps those settlements until claiming's next
round trip carries them, and counts their results.
"""

# The source of its blocking twin, _sync.py (tools/async_to_sync.py). The twin  # async-only
# runs each slot and each handler call in a thread, and waits on concurrent.futures  # async-only
# where this file has tasks and asyncio futures; the logic is the same.  # async-only

from __future__ import annotations

import asyncio  # async-only

# sync: import concurrent.futures
import threading
import time
from collections.abc import Callable
from typing import Any

from pgque.core.contract import AsyncSupportsWakeups, AsyncSupportsWorkers, AsyncTransport
from pgque.core.errors import ConnectionLost, PgqueError
from pgque.core.live_workers import DEFAULT_HEARTBEAT_S, SlotBeat, WorkerBeat
from pgque.core.models import Lease
from pgque.core.tracing import WorkerTracing
from pgque.core.worker._claiming.batcher_async import AsyncClaimBatcher
from pgque.core.worker._logs import failure_reason, lease_fields, log
from pgque.core.worker._names import holder_label, holder_prefix, installed_version
from pgque.core.worker._options import (
    DEFAULT_HARD_TIMEOUT,
    ERROR_JITTER,
    RECONNECT_BACKOFF,
    WorkerOptions,
)
from pgque.core.worker._outcome import Outcome, WorkerReport
from pgque.core.worker._policy import Backoff, RetryPolicy, StopWorker
from pgque.core.worker._reachability import WAKEUP_TEXTS, Reachability
from pgque.core.worker._report import RunReport, SafeHooks
from pgque.core.worker._running.handlers import Handler, check_handler, wants_lease
from pgque.core.worker._running.held import Held
from pgque.core.worker._running.processes import Isolation
from pgque.core.worker._running.runner_async import AsyncHandlerRunner

# sync: from pgque.core.worker._running.threads import run_in_thread
from pgque.core.worker._settling.batch_async import AsyncSettlementBatch
from pgque.core.worker._settling.decisions import (
    Decision,
    Finished,
    max_attempts_of,
    on_exhausted_of,
)
from pgque.core.worker._signals import SignalCounter, watch_signals
from pgque.core.worker._stopping import Idle, IdleStop, drained, stop_signals
from pgque.core.worker._waiting_async import pause, resolve
from pgque.core.worker.hooks import WorkerHooks

__all__ = ["AsyncWorker"]

#: The version a worker reports in its heartbeats (``WorkerInfo.version``).
_VERSION = installed_version()

#: The waiting helpers, under the names this module's code (and its tests) use.
_pause = pause
_resolve = resolve

#: How many round trips a worker may have out at once (each from its own batcher loop).
ROUND_TRIP_LOOPS = 2


class _Run:
    """The state of one ``run()``: its stop signals, busy-slot count, report and parts."""

    def __init__(
        self,
        stopping: asyncio.Future[None],
        abort: asyncio.Future[None],
        abandon: asyncio.Future[None],
        ended: asyncio.Future[None],
    ) -> None:
        #: done once no more messages may be claimed (graceful stop, or idle with stop_when_idle)
        self.stopping = stopping
        #: done once in-flight handlers must be given up (grace over, or a second signal)
        self.abort = abort
        #: done once handlers that cannot be stopped (threads) are left running and run()
        #: returns without them (a third signal, or stop(graceful=False) again): their leases
        #: are left to expire
        self.abandon = abandon
        #: done once the slots have ended: the heartbeats stop and the worker says goodbye
        self.ended = ended
        self.busy = 0
        #: what each busy slot runs, by slot index: group, message, monotonic start
        self.holding: dict[int, tuple[str, int, float]] = {}
        #: the error a handler's StopWorker carried (the first one): run() raises it
        self.fatal: BaseException | None = None
        #: the run's counts, hooks and logs (set by run())
        self.report: RunReport
        #: the three parts (set by run()): where the slots' leases come from, what runs the
        #: handler on them, and where finished leases wait to be settled
        self.claiming: AsyncClaimBatcher
        self.running: AsyncHandlerRunner
        self.settling: AsyncSettlementBatch


class AsyncWorker:
    """Run *handler* on the messages of *transport*'s queue, with asyncio tasks.

    *handler* receives the :class:`~pgque.core.Event`, or ``(event, lease)`` when it takes two
    positional parameters.
    It may be ``async def`` or a plain function (run in a thread).  # async-only
    Returning acks the message; raising nacks it with the
    delay *retry* computes from ``lease.attempt``; raising :class:`Retry` asks for a delay;
    raising :class:`Reject` dead-letters it at once. Every failure is recorded with the
    message (``nack(error=)``, ``dead_letter(error=)``: ``GroupInfo.last_error``,
    ``DeadLetter.error``). A failure on the last attempt the transport's ``max_attempts``
    allows is nacked without delay, and the transport's ``on_exhausted`` policy applies when
    the message is next claimed (it is dead-lettered, or its group blocked).
    Every claim carries ``holder="host:pid:slot"`` (*slot*: the index of the slot that will
    run it, 0 to ``concurrency - 1``, or ``queued`` for a lease claimed ahead into the
    buffer), shown as ``GroupInfo.lease_holder``.

    Server calls: a finished lease is settled with the next claim, in one
    ``settle_and_claim`` call that carries every settlement and claim waiting at that moment
    (up to two such calls are out at once); a transport without ``settle_and_claim`` gets
    the single calls instead.

    Options:

    - *concurrency*: how many slots (asyncio tasks) claim and run at once; each holds the
      leases of one claim at a time (one lease unless *batch_size* > 1, then up to that many
      leases of distinct groups, handled one after another).
    - *visibility*: the lease time in seconds. A lease is renewed every ``visibility / 2``
      while its handler runs, so a slow handler keeps its group.
    - *min_priority*: claim only groups of at least this priority.
    - *warn_after*: seconds after which a handler still running is reported as stuck: a
      WARNING naming the group, message id, attempt and how long it has run, repeated every
      *warn_after* seconds while it runs, and :meth:`WorkerHooks.on_stuck` (None, the
      default: never). The handler goes on; *hard_timeout* is what stops one.
    - *hard_timeout*: the longest a handler may run, in seconds (default 3600; None: no
      limit). Past it the handler is stopped
      (its task is cancelled)
      and, once it is over, its message is nacked with a ``TimeoutError`` naming the limit,
      with the *retry* policy's delay: the attempt counts, so a handler that always hangs
      reaches ``max_attempts`` in the end.
    - *shutdown_grace*: after a stop request, in-flight handlers get this long to finish;
      then they are stopped (as *hard_timeout* says) and their messages
      released (``release``: back at once for another worker, the attempt not counted). A
      lease is never given up while its handler may still run.
    - *isolation*: ``"thread"`` (default) runs a handler
      as an asyncio task if it is ``async def``, else  # async-only
      in a thread; ``"process"`` runs it in a child process (one per busy slot, reused), which
      *hard_timeout* and the end of the shutdown grace kill (SIGKILL), so a handler that hangs
      never holds its group past them. The handler must then be importable by name (a
      module-level function), and its event and lease are pickled to the child.
    - *idle_backoff*: ``(first, maximum)`` wait after an empty claim, doubling while idle. A
      transport that supports wake-ups (:class:`~pgque.core.AsyncSupportsWakeups`) is asked to
      wait for one instead of sleeping.
    - *prefetch*: at most how many leases the worker claims ahead of its slots into a
      buffer, so that a slot that finishes takes its next lease at once and one server call
      carries many (default: the larger of 64 and ``concurrency x batch_size``; 0 claims only
      for slots that wait). The buffer holds what the slots take in about 50 ms at their
      recent rate (so a slow handler keeps one or two leases ahead, a fast one many). A
      buffered lease's time counts from its claim: one no slot took within
      ``min(2 s, visibility / 4)`` is released (back at once for any worker, the attempt not
      counted). Its ``holder`` is ``host:pid:queued``.
    - *hooks*: a :class:`WorkerHooks` for metrics; *name*: used in logs (default host:pid).
    - *reconnect_backoff*: ``(first, maximum)`` wait after a transport error (a lost
      connection, or a :class:`~pgque.core.RetryableConflict`: a deadlock or serialization
      failure rolled back whole), doubling while errors go on; the same transport is used
      again (pooled transports reconnect on next use). Claims, stats and lease renewals are
      simply tried again; an ack, nack or dead-letter is retried until its lease ends. An
      outage of any length is ridden out: the first call that fails on a lost connection
      logs one WARNING ("lost the connection to the server"), the first answer after it one
      more ("connection back after N s"); the failures in between are logged at DEBUG.
    - *tracing*: OpenTelemetry CONSUMER spans, one per handler run (:mod:`pgque.core.tracing`):
      None (default) when opentelemetry-api is installed, False never, True always (raises
      ConfigurationError without opentelemetry-api).
    - *heartbeat_every*: on a transport that keeps live workers
      (:class:`~pgque.core.AsyncSupportsWorkers`; docs/workers.md), the worker registers when
      it starts, heartbeats every this many seconds (default 10, from 0.1 to 600) with what
      each busy slot holds, and says goodbye when :meth:`run` returns; other transports are
      not asked. A heartbeat that fails is counted as a transport error and tried again at
      the next interval.

    Raises InvalidInput for an option out of range or a handler that cannot take an event.
    """

    def __init__(
        self,
        transport: AsyncTransport,
        handler: Callable[..., Any],
        *,
        concurrency: int = 1,
        visibility: float = 30.0,
        batch_size: int = 1,
        min_priority: int = 0,
        retry: RetryPolicy | None = None,
        hard_timeout: float | None = DEFAULT_HARD_TIMEOUT,
        shutdown_grace: float = 30.0,
        idle_backoff: tuple[float, float] = (0.05, 2.0),
        hooks: WorkerHooks | None = None,
        name: str | None = None,
        reconnect_backoff: tuple[float, float] = RECONNECT_BACKOFF,
        prefetch: int | None = None,
        tracing: bool | None = None,
        warn_after: float | None = None,
        isolation: Isolation = "thread",
        heartbeat_every: float = DEFAULT_HEARTBEAT_S,
    ) -> None:
        self._options = WorkerOptions.build(
            concurrency=concurrency,
            visibility=visibility,
            batch_size=batch_size,
            min_priority=min_priority,
            retry=retry,
            hard_timeout=hard_timeout,
            shutdown_grace=shutdown_grace,
            idle_backoff=idle_backoff,
            name=name,
            reconnect_backoff=reconnect_backoff,
            prefetch=prefetch,
            warn_after=warn_after,
            heartbeat_every=heartbeat_every,
        )
        self._transport = transport
        takes_lease = wants_lease(handler)
        is_async = check_handler(handler, allow_async=True)  # async-only
        # sync: is_async = check_handler(handler, allow_async=False)
        self._hooks = SafeHooks(hooks)
        self._tracing = WorkerTracing(transport.queue, tracing)
        self._reach = self._new_reachability()
        self._wakeups = self._new_wakeup_tracker()
        self._max_attempts = max_attempts_of(transport)
        self._on_exhausted = on_exhausted_of(transport)
        self._handler = Handler(
            handler, takes_lease=takes_lease, is_async=is_async, isolation=isolation, name=self.name
        )
        self._lock = threading.Lock()
        self._run: _Run | None = None
        self._early_stop = False
        self._loop: asyncio.AbstractEventLoop | None = None  # async-only

    def __repr__(self) -> str:
        return f"AsyncWorker(name={self.name!r}, queue={self._transport.queue!r})"

    @property
    def name(self) -> str:
        """The worker's name, as it appears in logs."""
        return self._options.name

    @property
    def options(self) -> WorkerOptions:
        """The validated options."""
        return self._options

    @property
    def running(self) -> bool:
        """True while :meth:`run` is running."""
        return self._run is not None

    # ------------------------------------------------------------------ control

    async def run(
        self, *, stop_when_idle: bool = False, install_signal_handlers: bool = True
    ) -> WorkerReport:
        """Claim and handle messages until stopped; return the counts of what happened.

        With *stop_when_idle*, return once a claim finds nothing deliverable, no slot of this
        worker is busy, and the queue has no parked group (a retry waiting for its delay) and
        no message in flight elsewhere; blocked groups do not keep it running.
        With *install_signal_handlers* (main thread only), SIGINT and SIGTERM stop the worker
        gracefully, a second signal stops it at once (handlers in threads are waited for), a
        third returns without them; the previous handlers are restored.
        Raises PgqueError if this worker is already running, and the error a handler's
        :class:`StopWorker` carried (the worker stopped for it).
        """
        with self._lock:
            if self._run is not None:
                raise PgqueError(f"worker {self.name} is already running")
            self._loop = asyncio.get_running_loop()  # async-only
            futures = (
                self._new_future(),
                self._new_future(),
                self._new_future(),
                self._new_future(),
            )
            run = self._run = _Run(*futures)
            early, self._early_stop = self._early_stop, False
        if early:
            self._request_stop(True)
        self._handler.reopen()
        undo: Callable[[], None] = _nothing
        if install_signal_handlers:
            undo = watch_signals(SignalCounter(self.stop), asyncio.get_running_loop())  # async-only
            # sync: undo = watch_signals(SignalCounter(self.stop))
        started = time.monotonic()
        opts = self._options
        self._reach = self._new_reachability()
        self._wakeups = self._new_wakeup_tracker()
        self._compose(run)
        log.info(
            "worker %s started on queue %s (concurrency %d, visibility %gs)",
            self.name,
            self._transport.queue,
            opts.concurrency,
            opts.visibility,
        )
        loops = [self._spawn_round_trips(run, index) for index in range(ROUND_TRIP_LOOPS)]
        beats = self._spawn_heartbeats(run)
        slots = [self._spawn(run, index, stop_when_idle) for index in range(opts.concurrency)]
        try:
            await self._wait_slots(run, slots)
        except BaseException:
            self._request_stop(False)
            await asyncio.wait(slots, timeout=max(opts.shutdown_grace, 1.0))
            raise
        finally:
            run.claiming.close()  # sends what the slots left, releases the buffer
            _, late = await asyncio.wait(set(loops), timeout=max(opts.shutdown_grace, 1.0))
            if late:  # settlements still retried: give them up (each counted lost)
                with self._lock:
                    _resolve(run.abort)
                run.claiming.wake()
                await asyncio.wait(late, timeout=max(opts.reconnect_backoff[1], 1.0) * 2)
            with self._lock:
                _resolve(run.ended)
            await asyncio.wait({beats}, timeout=max(opts.reconnect_backoff[1], 1.0) * 2)
            undo()
            self._handler.close()
            with self._lock:
                self._run = None
        report = run.report.tally.report(time.monotonic() - started)
        log.info("worker %s stopped: %s", self.name, report.as_dict())
        if run.fatal is not None:
            raise run.fatal
        for slot in slots:
            error = slot.exception() if slot.done() and not slot.cancelled() else None
            if error is not None:
                raise error
        return report

    def stop(self, graceful: bool = True) -> None:
        """Ask :meth:`run` to stop; callable from any thread or task.

        (For signals, let ``run(install_signal_handlers=True)`` call it: a raw signal handler
        interrupts the main thread at any point, possibly inside this worker's lock.)

        Graceful: claim no more, let in-flight handlers finish within ``shutdown_grace``, then
        stop them. Not graceful: stop in-flight handlers now. A stopped handler's message is
        released: back at once, its attempt not counted. A handler that cannot be stopped (it
        runs in a thread) keeps its lease, renewed, until it returns, and is then settled by
        its own outcome; calling ``stop(graceful=False)`` once more (a third signal) makes
        :meth:`run` return without waiting for it, its lease left to expire (that expiry
        counts an attempt: the handler may have acted, or may hang for good). Leases a claim
        brings back after the stop are released at once.
        Called before :meth:`run`, it makes the next run return at once.
        """
        loop = self._loop  # async-only
        if loop is not None and not _in_loop(loop):  # async-only
            try:  # async-only
                loop.call_soon_threadsafe(self._request_stop, graceful)  # async-only
                return  # async-only
            except RuntimeError:  # async-only
                pass  # the loop is closed: nothing runs any more  # async-only
        self._request_stop(graceful)

    def _request_stop(self, graceful: bool) -> None:
        """Set the signals of the run a stop request sets (:func:`~._stopping.stop_signals`
        says which)."""
        with self._lock:
            run = self._run
            if run is None:
                self._early_stop = True
                return
            signals = stop_signals(graceful, run.abort.done())
            _resolve(run.stopping)
            if signals.abandon:
                _resolve(run.abandon)  # asked again: leave running threads behind
            if signals.abort:
                _resolve(run.abort)
        claiming: AsyncClaimBatcher | None = getattr(run, "claiming", None)
        if claiming is not None:
            claiming.wake()  # the buffer is given back at once

    def _new_reachability(self) -> Reachability:
        return Reachability(self.name, self._options.reconnect_backoff[1])

    def _new_wakeup_tracker(self) -> Reachability:
        # Quiet while the calls' tracker speaks: a whole outage is one pair of lines.
        return Reachability(
            self.name,
            self._options.reconnect_backoff[1],
            texts=WAKEUP_TEXTS,
            quiet=lambda: self._reach.settling(),
        )

    def _new_future(self) -> asyncio.Future[None]:
        return asyncio.get_running_loop().create_future()  # async-only
        # sync: return concurrent.futures.Future()

    def _spawn(self, run: _Run, index: int, stop_when_idle: bool) -> asyncio.Future[None]:
        return asyncio.ensure_future(self._slot(run, index, stop_when_idle))  # async-only
        # sync: name = f"{self.name}-slot-{index}"
        # sync: return run_in_thread(self._slot, run, index, stop_when_idle, name=name)

    def _compose(self, run: _Run) -> None:
        """Make the parts of *run*: settling, claiming (whose round trips carry what settling
        holds) and running, all telling one report."""
        opts = self._options
        transport = self._transport
        report = run.report = RunReport(self.name, self._hooks, self._tracing, self._reach)
        run.settling = AsyncSettlementBatch(transport, report, self._on_exhausted, abort=run.abort)
        run.claiming = AsyncClaimBatcher(
            transport,
            run.settling,
            opts,
            report,
            buffer_holder=holder_label("queued"),
            new_future=self._new_future,
            stopping=run.stopping,
            abort=run.abort,
        )
        run.running = AsyncHandlerRunner(
            self._handler,
            transport,
            opts,
            report,
            max_attempts=self._max_attempts,
            on_exhausted=self._on_exhausted,
            abort=run.abort,
            abandon=run.abandon,
        )

    def _spawn_heartbeats(self, run: _Run) -> asyncio.Future[None]:
        return asyncio.ensure_future(self._heartbeats(run))  # async-only
        # sync: return run_in_thread(self._heartbeats, run, name=f"{self.name}-heartbeats")

    async def _heartbeats(self, run: _Run) -> None:
        """Register the worker, heartbeat every ``heartbeat_every`` seconds until the run's
        slots have ended, then say goodbye: only on a transport that keeps live workers."""
        transport = self._transport
        if not (transport.capabilities.workers and isinstance(transport, AsyncSupportsWorkers)):
            return
        every = self._options.heartbeat_every
        while not run.ended.done():
            try:
                await transport.heartbeat(self._beat(run))
            except Exception as exc:
                run.report.transport_error(exc, None, "heartbeat")
            # Not _pause, which the tests of the slots' waits replace: the heartbeats keep
            # their own pace.
            await pause(run.ended, every)
        try:
            await transport.goodbye(self.name)
        except Exception as exc:
            run.report.transport_error(exc, None, "goodbye")

    def _beat(self, run: _Run) -> WorkerBeat:
        """What this worker's next heartbeat says: who it is and what each busy slot holds."""
        now = time.monotonic()
        with self._lock:
            holding = sorted(run.holding.items())
        prefix = holder_prefix()
        host, _, pid = prefix.rpartition(":")
        return WorkerBeat(
            id=self.name,
            holder=prefix,
            host=host,
            pid=int(pid),
            version=_VERSION,
            concurrency=self._options.concurrency,
            heartbeat_every=self._options.heartbeat_every,
            slots=tuple(
                SlotBeat(slot, group_id, message_id, max(now - since, 0.0))
                for slot, (group_id, message_id, since) in holding
            ),
        )

    def _spawn_round_trips(self, run: _Run, index: int) -> asyncio.Future[None]:
        return asyncio.ensure_future(run.claiming.loop())  # async-only
        # sync: name = f"{self.name}-claiming-{index}"
        # sync: return run_in_thread(run.claiming.loop, name=name)

    async def _wait_slots(self, run: _Run, slots: list[asyncio.Future[None]]) -> None:
        """Wait for the slots to end, enforcing the shutdown grace once a stop is requested."""
        pending: set[asyncio.Future[None]] = set(slots)
        while pending and not run.stopping.done():
            _, pending = await asyncio.wait(
                pending | {run.stopping}, return_when=asyncio.FIRST_COMPLETED
            )
            pending.discard(run.stopping)
        deadline = time.monotonic() + self._options.shutdown_grace
        while pending and not run.abort.done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                log.warning(
                    "worker %s: shutdown grace of %gs is over; releasing in-flight messages",
                    self.name,
                    self._options.shutdown_grace,
                )
                with self._lock:
                    _resolve(run.abort)
                break
            _, pending = await asyncio.wait(
                pending | {run.abort}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
            pending.discard(run.abort)
        if pending:
            await asyncio.wait(pending)

    # ------------------------------------------------------------------ one slot

    async def _slot(self, run: _Run, index: int, stop_when_idle: bool) -> None:
        """Take, handle and hand back leases until the run stops.

        Leases come from claiming (its buffer, or its next round trip) and run in running; a
        finished lease goes to settling, to ride on claiming's next round trip.
        """
        opts = self._options
        idle = Backoff(*opts.idle_backoff)
        errors = Backoff(*opts.reconnect_backoff, jitter=ERROR_JITTER)
        idle_stop = IdleStop()  # an empty claim after drained stats confirms them
        holder = holder_label(index)
        claiming = run.claiming
        while not run.stopping.done():
            self._busy(run, +1)
            try:
                leases, claimed_at = await claiming.take(holder, opts.batch_size)
            except Exception:
                self._busy(run, -1)  # claiming reported the error, once for the call
                await _pause(run.stopping, errors.next())
                continue
            errors.reset()
            if not leases:
                nobody_busy = self._busy(run, -1) == 0 and not claiming.busy()
                if run.stopping.done():
                    break
                quiet = stop_when_idle and nobody_busy and await self._drained(run)
                step = idle_stop.empty(quiet)
                if step is Idle.STOP:
                    log.info("worker %s: nothing left to deliver; stopping", self.name)
                    self._request_stop(True)
                    break
                if step is Idle.CONFIRM:
                    continue
                await self._idle_wait(run, idle)
                continue
            idle_stop.claimed()
            idle.reset()
            try:
                await self._work(run, Held(leases, claimed_at, opts), index)
            finally:
                self._busy(run, -1)

    def _busy(self, run: _Run, delta: int) -> int:
        with self._lock:
            run.busy += delta
            return run.busy

    async def _drained(self, run: _Run) -> bool:
        """Return True if nothing can become deliverable without an operator."""
        sent = time.monotonic()
        try:
            stats = await self._transport.stats()
        except Exception as exc:
            run.report.transport_error(exc, None, "stats")
            return False
        self._reach.reached(sent)
        return drained(stats)

    async def _idle_wait(self, run: _Run, idle: Backoff) -> None:
        """Wait before the next claim: on the transport's wake-up if it has one, else sleep."""
        delay = idle.next()
        transport = self._transport
        if not isinstance(transport, AsyncSupportsWakeups):
            await _pause(run.stopping, delay)
            return
        sent = time.monotonic()
        try:
            woken = await transport.wait_for_messages(delay)
        except ConnectionLost as exc:
            # The listener's own connection (maybe another server: listen_url): tracked apart
            # from the calls', so a listener down while claims work is one line, not a flap.
            run.report.tally.add_error()
            self._hooks.error(exc, None)
            self._wakeups.lost(exc, "wait_for_messages")
            await _pause(run.stopping, delay)
            return
        except Exception as exc:
            run.report.transport_error(exc, None, "wait_for_messages")
            await _pause(run.stopping, delay)
            return
        self._wakeups.reached(sent)
        if woken:
            idle.reset()

    # ------------------------------------------------------------------ one take

    async def _work(self, run: _Run, held: Held, slot: int) -> None:
        """Run the leases of one take in order; release what shutdown leaves undone.

        Each finished lease goes to settling at once (it rides on claiming's next round trip);
        the slot does not wait for it.
        """
        running = run.running
        for key in sorted(held.held):
            if key not in held.held:
                continue
            lease = held.held[key]
            stopping = run.stopping.done() or key in held.lost
            finished: Finished | None
            if stopping or running.dead_on_arrival(held, key):
                finished = running.finish(held, key, Decision(Outcome.RELEASED), 0.0)
            else:
                with self._lock:
                    run.holding[slot] = (lease.group_id, lease.message_id, time.monotonic())
                try:
                    finished, stop = await running.handle(held, key)
                finally:
                    with self._lock:
                        run.holding.pop(slot, None)
                if stop is not None:
                    self._stop_for(run, lease, stop)
            if finished is not None:
                run.settling.put(finished)

    def _stop_for(self, run: _Run, lease: Lease, error: StopWorker) -> None:
        """Stop the run for a StopWorker: not the message's failure, so it is released."""
        log.error(
            "worker %s: stopping: %s (message %s released)",
            self.name,
            failure_reason(error.error),
            lease.message_id,
            extra=lease_fields(lease),
        )
        with self._lock:
            if run.fatal is None:
                run.fatal = error.error
        self._request_stop(True)


def _nothing() -> None:
    pass


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:  # async-only
    try:  # async-only
        return asyncio.get_running_loop() is loop  # async-only
    except RuntimeError:  # async-only
        return False  # async-only
