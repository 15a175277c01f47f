"""The asyncio worker: runs a handler on the messages of one queue, safely."""

# The source of its blocking twin, _sync.py (tools/async_to_sync.py). The twin  # async-only
# runs each slot and each handler call in a thread, and waits on concurrent.futures  # async-only
# where this file has tasks and asyncio futures; the logic is the same.  # async-only

from __future__ import annotations

import asyncio  # async-only

# sync: import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from pgque.core.contract import AsyncSupportsWakeups, AsyncTransport
from pgque.core.errors import ConnectionLost, PgqueError
from pgque.core.models import Lease, Settlement, SettleResult
from pgque.core.tracing import WorkerTracing
from pgque.core.worker._common import (
    DEFAULT_HARD_TIMEOUT,
    ERROR_JITTER,
    RECONNECT_BACKOFF,
    SETTLE_VERB,
    WAKEUP_TEXTS,
    Decision,
    HandlerThreads,
    Reachability,
    SafeHooks,
    SignalCounter,
    WorkerOptions,
    check_handler,
    consume_result,
    counted_outcome,
    decide,
    failure_reason,
    handler_error,
    holder_label,
    log,
    max_attempts_of,
    on_exhausted_of,
    start_margin,
    wants_lease,
    watch_signals,
)

# sync: from pgque.core.worker._common import run_in_thread
from pgque.core.worker._exchange_async import AsyncExchange, Finished, PartlyApplied, pause, resolve
from pgque.core.worker._outcome import Outcome, Tally, WorkerReport
from pgque.core.worker._policy import Backoff, Retry, RetryPolicy, StopWorker
from pgque.core.worker._processes import (
    CHILD_POLL_S,
    HandlerCall,
    HandlerKilled,
    HandlerProcesses,
    Isolation,
    check_isolation,
    hard_deadline,
)
from pgque.core.worker.hooks import WorkerHooks

__all__ = ["AsyncWorker"]

#: The exchange's helpers, under the names this module's code (and its tests) use.
_pause = pause
_resolve = resolve

#: How many server calls a worker may have out at once (each from its own exchange loop).
EXCHANGE_LOOPS = 2


class _Run:
    """The state of one ``run()``: its stop signals, busy-slot count and tally."""

    def __init__(
        self,
        stopping: asyncio.Future[None],
        abort: asyncio.Future[None],
        abandon: asyncio.Future[None],
    ) -> None:
        #: done once no more messages may be claimed (graceful stop, or idle with stop_when_idle)
        self.stopping = stopping
        #: done once in-flight handlers must be given up (grace over, or a second signal)
        self.abort = abort
        #: done once handlers that cannot be stopped (threads) are left running and run()
        #: returns without them (a third signal, or stop(graceful=False) again): their leases
        #: are left to expire
        self.abandon = abandon
        self.busy = 0
        self.tally = Tally()
        #: the error a handler's StopWorker carried (the first one): run() raises it
        self.fatal: BaseException | None = None
        #: where the slots' leases come from and go back to (set by run())
        self.exchange: AsyncExchange


class _Batch:
    """The leases one slot holds: those of one claim, settled one after another."""

    def __init__(self, leases: Sequence[Lease], claimed_at: float, options: WorkerOptions) -> None:
        self.held: dict[int, Lease] = dict(enumerate(leases))
        self.lost: set[int] = set()
        #: when the leases must next be renewed, and when they expire at the latest
        #: (local monotonic estimates, measured from before the claim or extend was sent)
        self.renewed_at = claimed_at
        self.next_renewal = claimed_at + options.extend_every
        self.expires_at = claimed_at + options.visibility


class _Reports:
    """What the exchange reports, turned into the worker's counts, hooks and logs."""

    def __init__(self, worker: AsyncWorker, run: _Run) -> None:
        self._worker = worker
        self._run = run

    def settled(self, finished: Finished, done: bool) -> None:
        self._worker._settled(self._run, finished, done)

    def failed(self, error: BaseException, lease: Lease | None, operation: str) -> None:
        self._worker._transport_error(self._run, error, lease, operation)

    def claimed(self, leases: list[Lease]) -> None:
        self._run.tally.add_claimed(len(leases))
        hooks = self._worker._hooks
        if hooks.hooks is not None:
            for lease in leases:
                hooks.claimed(lease)


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
        )
        self._transport = transport
        self._handler = handler
        self._wants_lease = wants_lease(handler)
        self._handler_is_async = check_handler(handler, allow_async=True)  # async-only
        # sync: check_handler(handler, allow_async=False)
        self._hooks = SafeHooks(hooks)
        self._tracing = WorkerTracing(transport.queue, tracing)
        self._reach = self._new_reachability()
        self._wakeups = self._new_wakeup_tracker()
        self._max_attempts = max_attempts_of(transport)
        self._on_exhausted = on_exhausted_of(transport)
        #: the transport settles and claims in one call (else the worker makes the calls)
        self._fused = callable(getattr(transport, "settle_and_claim", None))
        self._threads = HandlerThreads(f"{self.name}-handler")
        self._processes: HandlerProcesses | None = None
        if check_isolation(isolation, handler) == "process":
            self._processes = HandlerProcesses(handler, self._threads.submit)
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
            futures = (self._new_future(), self._new_future(), self._new_future())
            run = self._run = _Run(*futures)
            early, self._early_stop = self._early_stop, False
        if early:
            self._request_stop(True)
        self._threads.reopen()
        if self._processes is not None:
            self._processes.reopen()
        undo: Callable[[], None] = _nothing
        if install_signal_handlers:
            undo = watch_signals(SignalCounter(self.stop), asyncio.get_running_loop())  # async-only
            # sync: undo = watch_signals(SignalCounter(self.stop))
        started = time.monotonic()
        opts = self._options
        self._reach = self._new_reachability()
        self._wakeups = self._new_wakeup_tracker()
        log.info(
            "worker %s started on queue %s (concurrency %d, visibility %gs)",
            self.name,
            self._transport.queue,
            opts.concurrency,
            opts.visibility,
        )
        run.exchange = self._new_exchange(run)
        loops = [self._spawn_exchange(run, index) for index in range(EXCHANGE_LOOPS)]
        slots = [self._spawn(run, index, stop_when_idle) for index in range(opts.concurrency)]
        try:
            await self._wait_slots(run, slots)
        except BaseException:
            self._request_stop(False)
            await asyncio.wait(slots, timeout=max(opts.shutdown_grace, 1.0))
            raise
        finally:
            run.exchange.close()  # sends what the slots left, releases the buffer
            _, late = await asyncio.wait(set(loops), timeout=max(opts.shutdown_grace, 1.0))
            if late:  # settlements still retried: give them up (each counted lost)
                with self._lock:
                    _resolve(run.abort)
                run.exchange.wake()
                await asyncio.wait(late, timeout=max(opts.reconnect_backoff[1], 1.0) * 2)
            undo()
            if self._processes is not None:
                self._processes.close()
            self._threads.close()
            with self._lock:
                self._run = None
        report = run.tally.report(time.monotonic() - started)
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
        with self._lock:
            run = self._run
            if run is None:
                self._early_stop = True
                return
            _resolve(run.stopping)
            if not graceful:
                if run.abort.done():
                    _resolve(run.abandon)  # asked again: leave running threads behind
                _resolve(run.abort)
        exchange: AsyncExchange | None = getattr(run, "exchange", None)
        if exchange is not None:
            exchange.wake()  # the buffer is given back at once

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

    def _new_exchange(self, run: _Run) -> AsyncExchange:
        return AsyncExchange(
            self._call,
            self._options,
            _Reports(self, run),
            prefetch=self._options.buffer_size,
            buffer_holder=holder_label("queued"),
            new_future=self._new_future,
            stopping=run.stopping,
            abort=run.abort,
            split_when_lost=not getattr(self._transport.capabilities, "atomic_batches", True),
            confirm=self._took_effect,
        )

    async def _took_effect(self, finished: Finished) -> bool:
        """Whether a settlement whose reply was lost, and which was answered False when sent
        again, took effect the first time: the store is asked for the lease's group. An ack
        or a dead letter took effect if the message left the group's head; a nack or a
        release if the message is still the head and no lease holds the group."""
        lease = finished.lease
        info = await self._transport.group(lease.group_id)
        gone = info is None or info.head_message_id != lease.message_id
        if finished.decision.outcome in (Outcome.ACKED, Outcome.DEAD_LETTERED):
            took = gone
        else:
            took = not gone and info is not None and info.state != "leased"
        log.info(
            "worker %s: the %s of message %s, sent before a lost reply, %s",
            self.name,
            SETTLE_VERB[finished.decision.outcome],
            lease.message_id,
            "had taken effect" if took else "had not taken effect: its lease is lost",
            extra=_extra(lease),
        )
        return took

    def _spawn_exchange(self, run: _Run, index: int) -> asyncio.Future[None]:
        return asyncio.ensure_future(run.exchange.loop())  # async-only
        # sync: name = f"{self.name}-exchange-{index}"
        # sync: return run_in_thread(run.exchange.loop, name=name)

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

        Leases come from the exchange (its buffer, or its next call); a finished lease goes
        back to it, to be settled with the next call the exchange makes.
        """
        opts = self._options
        idle = Backoff(*opts.idle_backoff)
        errors = Backoff(*opts.reconnect_backoff, jitter=ERROR_JITTER)
        # Stats are read after an empty claim, so a park that ends in between looks "drained"
        # while its group is claimable: only a second empty claim after such stats confirms.
        confirming = False
        holder = holder_label(index)
        exchange = run.exchange
        while not run.stopping.done():
            self._busy(run, +1)
            try:
                leases, claimed_at = await exchange.take(holder, opts.batch_size)
            except Exception:
                self._busy(run, -1)  # the exchange reported the error, once for the call
                await _pause(run.stopping, errors.next())
                continue
            errors.reset()
            if not leases:
                nobody_busy = self._busy(run, -1) == 0 and not exchange.busy()
                if run.stopping.done():
                    break
                if stop_when_idle and nobody_busy and await self._drained(run):
                    if confirming:
                        log.info("worker %s: nothing left to deliver; stopping", self.name)
                        self._request_stop(True)
                        break
                    confirming = True
                    continue
                confirming = False
                await self._idle_wait(run, idle)
                continue
            confirming = False
            idle.reset()
            try:
                await self._work(run, _Batch(leases, claimed_at, opts))
            finally:
                self._busy(run, -1)

    def _busy(self, run: _Run, delta: int) -> int:
        with self._lock:
            run.busy += delta
            return run.busy

    async def _call(self, settlements: list[Settlement], holders: list[str]) -> SettleResult:
        """``settle_and_claim`` on the transport (or its parts, on one that lacks it)."""
        opts = self._options
        transport = self._transport
        sent = time.monotonic()
        if self._fused:
            result = await transport.settle_and_claim(
                settlements,
                len(holders),
                opts.visibility,
                min_priority=opts.min_priority,
                holder=holders,
            )
            self._reach.reached(sent)
            return result
        settled: list[bool] = []
        for item in settlements:
            try:
                settled.append(await self._apply(item))
            except Exception as exc:
                if not settled:
                    raise
                raise PartlyApplied(settled, exc) from exc  # the ones before it stand
        leases: list[Lease] = []
        try:
            for label, count in _runs(holders):  # one claim per run of equal labels
                if count == 1:
                    lease = await transport.claim(
                        opts.visibility, min_priority=opts.min_priority, holder=label
                    )
                    got = [] if lease is None else [lease]
                else:
                    got = await transport.claim_many(
                        count, opts.visibility, min_priority=opts.min_priority, holder=label
                    )
                leases += got
                if len(got) < count:
                    break  # nothing more is claimable
        except Exception as exc:
            if not settled and not leases:
                raise
            raise PartlyApplied(settled, exc, leases) from exc
        self._reach.reached(sent)
        return SettleResult(settled, leases)

    async def _apply(self, item: Settlement) -> bool:
        transport = self._transport
        if item.outcome == "ack":
            return await transport.ack(item.lease)
        if item.outcome == "release":
            return await transport.release(item.lease)
        if item.outcome == "dead_letter":
            return await transport.dead_letter(item.lease, item.reason, error=item.error)
        return await transport.nack(item.lease, delay=item.delay, error=item.error)

    async def _drained(self, run: _Run) -> bool:
        """Return True if nothing can become deliverable without an operator."""
        sent = time.monotonic()
        try:
            stats = await self._transport.stats()
        except Exception as exc:
            self._transport_error(run, exc, None, "stats")
            return False
        self._reach.reached(sent)
        return stats.parked == 0 and stats.in_flight == 0

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
            run.tally.add_error()
            self._hooks.error(exc, None)
            self._wakeups.lost(exc, "wait_for_messages")
            await _pause(run.stopping, delay)
            return
        except Exception as exc:
            self._transport_error(run, exc, None, "wait_for_messages")
            await _pause(run.stopping, delay)
            return
        self._wakeups.reached(sent)
        if woken:
            idle.reset()

    # ------------------------------------------------------------------ one claim

    async def _work(self, run: _Run, batch: _Batch) -> None:
        """Handle the leases of one take in order; release what shutdown leaves undone.

        Each finished lease goes to the exchange at once (its settlement travels with the
        next call); the slot does not wait for it.
        """
        for key in sorted(batch.held):
            if key not in batch.held:
                continue
            stopping = run.stopping.done() or key in batch.lost
            if stopping or self._dead_on_arrival(batch, key):
                finished = self._finish_lease(run, batch, key, Decision(Outcome.RELEASED), 0.0)
            else:
                finished = await self._handle(run, batch, key)
            if finished is not None:
                run.exchange.settle(finished)

    def _dead_on_arrival(self, batch: _Batch, key: int) -> bool:
        """Return True (and log it) if lease *key* of *batch* may have ended already by the
        worker's clock, counted from when its claim (or last renewal) was sent: another worker
        may hold its message now, so its handler must not start. It is released (fenced: a
        no-op if it is gone) rather than run."""
        left = batch.expires_at - time.monotonic()
        if left >= start_margin(self._options.visibility):
            return False
        lease = batch.held[key]
        log.warning(
            "worker %s: lease of message %s of group %s arrived with %.3f s left of its "
            "visibility (%gs, counted from when the claim was sent); not started",
            self.name,
            lease.message_id,
            lease.group_id,
            left,
            self._options.visibility,
            extra=_extra(lease),
        )
        return True

    def _finish_lease(
        self, run: _Run, batch: _Batch, key: int, decision: Decision, started: float
    ) -> Finished | None:
        """Take lease *key* out of *batch* to be settled; None if it was lost (counted)."""
        lease = batch.held.pop(key)
        started = started or time.monotonic()
        if key in batch.lost:
            lost = decision.outcome if decision.outcome is Outcome.TIMED_OUT else Outcome.LOST
            counted = counted_outcome(lost, decision, self._on_exhausted)
            self._finish(run, counted, started, lease, _timed_out(decision))
            return None
        return Finished(lease, decision, started, batch.expires_at)

    def _settled(self, run: _Run, finished: Finished, done: bool) -> None:
        """Count the outcome of a settlement that took effect (*done*) or did not."""
        decision = finished.decision
        timed_out = decision.outcome is Outcome.TIMED_OUT  # its lease ends either way
        outcome = decision.outcome if done or timed_out else Outcome.LOST
        if not done:
            log.warning(
                "worker %s: could not %s message %s: lease no longer held",
                self.name,
                SETTLE_VERB[decision.outcome],
                finished.lease.message_id,
                extra=_extra(finished.lease),
            )
        outcome = counted_outcome(outcome, decision, self._on_exhausted)
        self._finish(run, outcome, finished.started, finished.lease, _timed_out(decision))

    async def _handle(self, run: _Run, batch: _Batch, key: int) -> Finished | None:
        """Run the handler on one lease, renewing the batch's leases; return what to settle.

        A lease is never given up while its handler may still run: at the end of the shutdown
        grace, or past *hard_timeout*, an asyncio task is cancelled and awaited; a handler in a
        thread cannot be stopped, so its lease is kept (renewed) until the thread returns, and
        reported (a warning naming the group, :meth:`WorkerHooks.on_unstoppable`).
        """
        opts = self._options
        lease = batch.held[key]
        started = time.monotonic()
        task, call = self._start_handler(lease)
        deadline = hard_deadline(opts.hard_timeout, started, call)
        warn_at = None if opts.warn_after is None else started + opts.warn_after
        #: what to settle once the handler is over, when it was given up (grace, timeout)
        given_up: Decision | None = None
        while not task.done():
            limit = deadline if given_up is None else None
            wake = min(t for t in (batch.next_renewal, limit, warn_at) if t is not None)
            if call is not None and call.begun_at is None:  # its child is starting
                wake = min(wake, time.monotonic() + CHILD_POLL_S)
            waited = {task, run.abandon} if given_up else {task, run.abort}
            await asyncio.wait(
                waited,
                timeout=max(wake - time.monotonic(), 0.0),
                return_when=asyncio.FIRST_COMPLETED,
            )
            if task.done():
                break
            deadline = hard_deadline(opts.hard_timeout, started, call)
            if given_up is not None and run.abandon.done():
                self._left_running(batch, key, started)  # counted lost; never waited for
                return self._finish_lease(run, batch, key, given_up, started)
            if given_up is None and run.abort.done():
                given_up = Decision(Outcome.RELEASED)
                self._give_up(task, call, lease, started, "the shutdown grace is over")
            elif given_up is None and deadline is not None and time.monotonic() >= deadline:
                given_up = self._timed_out(lease)
                self._give_up(
                    task, call, lease, started, f"it overran hard_timeout ({opts.hard_timeout:g}s)"
                )
            if warn_at is not None and time.monotonic() >= warn_at:
                warn_at = self._stuck(lease, started, warn_at)
            if time.monotonic() >= batch.next_renewal:
                await self._renew(run, batch)
        error = handler_error(task)
        stopped = task.cancelled() or isinstance(error, HandlerKilled)
        if given_up is not None and (given_up.outcome is Outcome.TIMED_OUT or stopped):
            return self._finish_lease(run, batch, key, given_up, started)
        if isinstance(error, StopWorker):
            self._stop_for(run, lease, error)
            return self._finish_lease(run, batch, key, Decision(Outcome.RELEASED), started)
        decision = decide(error, lease, opts.retry, self._max_attempts)
        if error is not None:
            self._log_failure(lease, error, decision)
        return self._finish_lease(run, batch, key, decision, started)

    def _give_up(
        self,
        task: asyncio.Future[Any],
        call: HandlerCall | None,
        lease: Lease,
        started: float,
        why: str,
    ) -> None:
        """Stop a handler that must end (*why*): kill its process, or cancel its task; a
        thread cannot be stopped, so its lease is kept until it returns, and that is
        reported."""
        if call is not None:
            log.warning(
                "worker %s: killing the process running the handler of message %s of group %s (%s)",
                self.name,
                lease.message_id,
                lease.group_id,
                why,
                extra=_extra(lease),
            )
            call.stop()
            return
        if self._can_stop_handlers():
            task.cancel()
            return
        running = time.monotonic() - started
        log.warning(
            "worker %s: the handler of message %s of group %s must stop (%s) but runs in a "
            "thread, which cannot be stopped: its lease is kept (renewed) until it returns "
            "(%.1f s so far)",
            self.name,
            lease.message_id,
            lease.group_id,
            why,
            running,
            extra=_extra(lease, running_s=running),
        )
        self._hooks.unstoppable(lease, running)

    def _left_running(self, batch: _Batch, key: int, started: float) -> None:
        """Leave the handler of lease *key* running as the run ends without it: its lease is
        neither renewed nor released (the handler may still act), so it expires, and that
        expiry counts an attempt of the message; it is counted lost."""
        lease = batch.held[key]
        batch.lost.add(key)
        log.warning(
            "worker %s: leaving the handler of message %s of group %s running in its thread "
            "after %.1f s: its lease is left to expire (the expiry counts an attempt)",
            self.name,
            lease.message_id,
            lease.group_id,
            time.monotonic() - started,
            extra=_extra(lease),
        )

    def _can_stop_handlers(self) -> bool:
        """Whether a running handler can be stopped: an asyncio task can be cancelled, a
        thread cannot."""
        return self._handler_is_async  # async-only
        # sync: return False

    def _start_handler(self, lease: Lease) -> tuple[asyncio.Future[Any], HandlerCall | None]:
        """Start the handler on *lease*; return its future and, when it runs in a child
        process, the call that can kill it."""
        args = (lease.event, lease) if self._wants_lease else (lease.event,)
        handler = self._tracing.start(lease, self._handler)  # its span current inside
        task: asyncio.Future[Any]
        if self._processes is not None:  # the span covers the call; not current in the child
            future, call = self._processes.submit(*args)
            task = asyncio.wrap_future(future)  # async-only
            # sync: task = future
            task.add_done_callback(consume_result)
            return task, call
        if self._handler_is_async:  # async-only
            task = asyncio.ensure_future(handler(*args))  # async-only
        else:  # async-only
            thread = self._threads.submit(handler, *args)  # async-only
            task = asyncio.wrap_future(thread)  # async-only
        # sync: task = self._threads.submit(handler, *args)
        task.add_done_callback(consume_result)
        return task, None

    async def _renew(self, run: _Run, batch: _Batch) -> None:
        """Extend every lease the batch still holds; note the ones found lost."""
        opts = self._options
        sent = time.monotonic()
        failed = False
        for key, lease in list(batch.held.items()):
            if key in batch.lost:
                continue
            try:
                renewed = await self._transport.extend(lease, opts.visibility)
            except Exception as exc:
                self._transport_error(run, exc, lease, "extend")
                failed = True
                continue
            self._reach.reached(sent)
            if renewed is None:
                log.warning(
                    "worker %s: lease of message %s was lost (expired and maybe reclaimed)",
                    self.name,
                    lease.message_id,
                    extra=_extra(lease),
                )
                batch.lost.add(key)
            else:
                batch.held[key] = renewed
        if failed:
            # the old leases still hold until they expire: try again soon, not in half a lease
            batch.next_renewal = time.monotonic() + min(1.0, opts.extend_every / 4)
        else:
            batch.renewed_at = sent
            batch.expires_at = sent + opts.visibility
            batch.next_renewal = sent + opts.extend_every

    def _stuck(self, lease: Lease, started: float, warn_at: float) -> float:
        """Report a handler running past ``warn_after``; return when to report it next."""
        every = self._options.warn_after or 0.0
        now = time.monotonic()
        running = now - started
        log.warning(
            "worker %s: handler still running after %.1f s (warn_after %gs) on message %s "
            "of group %s (attempt %d)",
            self.name,
            running,
            every,
            lease.message_id,
            lease.group_id,
            lease.attempt,
            extra=_extra(lease, running_s=running),
        )
        self._hooks.stuck(lease, running)
        # At most once per interval: a slot that woke late (a slow renewal) skips the missed.
        following = warn_at + every
        return following if following > now else now + every

    def _timed_out(self, lease: Lease) -> Decision:
        """Decide for a handler stopped at its hard timeout, and log it.

        The message is nacked with a TimeoutError naming the limit (so that the failure is
        recorded and the attempt counts), with the retry policy's delay; the nack is sent once
        the handler is over (a thread that cannot be stopped keeps its lease until then).
        """
        limit = self._options.hard_timeout
        error = TimeoutError(f"handler overran hard_timeout ({limit:g}s); stopped")
        retry = decide(error, lease, self._options.retry, self._max_attempts)
        log.warning(
            "worker %s: handler overran hard_timeout (%gs) on message %s of group %s "
            "(attempt %d); %s",
            self.name,
            limit,
            lease.message_id,
            lease.group_id,
            lease.attempt,
            self._exhausted_text() if retry.final else f"it comes back in {retry.delay:g} s",
            extra=_extra(lease, outcome=Outcome.TIMED_OUT.value),
        )
        return Decision(Outcome.TIMED_OUT, delay=retry.delay, error=error, final=retry.final)

    def _exhausted_text(self) -> str:
        """What the transport does to a message whose last attempt failed, for logs."""
        if self._on_exhausted == "block":
            return (
                f"it was the last of max_attempts ({self._max_attempts}): its group "
                "will be blocked (`pgque unblock` releases it)"
            )
        return f"it was the last of max_attempts ({self._max_attempts}): it will be dead-lettered"

    # ------------------------------------------------------------------ reporting

    def _finish(
        self, run: _Run, outcome: Outcome, started: float, lease: Lease, timed_out: bool = False
    ) -> None:
        """Count a lease's *outcome* (*timed_out*: its handler was stopped at hard_timeout)."""
        duration = time.monotonic() - started
        run.tally.add(outcome, timed_out=timed_out)
        self._tracing.finish(lease, outcome.value)
        if self._hooks.hooks is not None:
            self._hooks.outcome(outcome, duration, lease)
        if not log.isEnabledFor(logging.DEBUG):
            return
        log.debug(
            "worker %s: message %s %s in %.3fs",
            self.name,
            lease.message_id,
            outcome.value,
            duration,
            extra=_extra(lease, outcome=outcome.value, duration_s=duration),
        )

    def _stop_for(self, run: _Run, lease: Lease, error: StopWorker) -> None:
        """Stop the run for a StopWorker: not the message's failure, so it is released."""
        log.error(
            "worker %s: stopping: %s (message %s released)",
            self.name,
            failure_reason(error.error),
            lease.message_id,
            extra=_extra(lease),
        )
        with self._lock:
            if run.fatal is None:
                run.fatal = error.error
        self._request_stop(True)

    def _log_failure(self, lease: Lease, error: BaseException, decision: Decision) -> None:
        extra = _extra(lease, outcome=decision.outcome.value)
        if decision.outcome is Outcome.DEAD_LETTERED:
            log.warning(
                "worker %s: handler rejected message %s: %s",
                self.name,
                lease.message_id,
                decision.reason,
                extra=extra,
            )
        elif decision.final:
            log.warning(
                "worker %s: handler failed on message %s (attempt %d): %s; %s",
                self.name,
                lease.message_id,
                lease.attempt,
                failure_reason(error),
                self._exhausted_text(),
                exc_info=None if isinstance(error, Retry) else error,
                extra=extra,
            )
        elif isinstance(error, Retry):
            log.info(
                "worker %s: handler asked to retry message %s in %gs",
                self.name,
                lease.message_id,
                decision.delay,
                extra=extra,
            )
        else:
            log.warning(
                "worker %s: handler failed on message %s (attempt %d): %s; retry in %.3gs",
                self.name,
                lease.message_id,
                lease.attempt,
                failure_reason(error),
                decision.delay,
                exc_info=error,
                extra=extra,
            )

    def _transport_error(
        self, run: _Run, error: BaseException, lease: Lease | None, operation: str
    ) -> None:
        run.tally.add_error()
        self._hooks.error(error, lease)
        if isinstance(error, ConnectionLost):  # an outage: logged once, when it begins
            self._reach.lost(error, operation)
            return
        log.warning(
            "worker %s: %s failed: %s; backing off",
            self.name,
            operation,
            failure_reason(error),
            extra={"pgque_worker": self.name, "pgque_operation": operation},
        )


def _timed_out(decision: Decision) -> bool:
    """Whether *decision* is that of a handler stopped at its hard timeout."""
    return decision.outcome is Outcome.TIMED_OUT


def _extra(lease: Lease, **more: object) -> dict[str, object]:
    """Structured log fields of a lease: identifiers only, never the event's data."""
    return {
        "pgque_queue": lease.queue,
        "pgque_group": lease.group_id,
        "pgque_message_id": lease.message_id,
        "pgque_attempt": lease.attempt,
        **{f"pgque_{k}": v for k, v in more.items()},
    }


def _nothing() -> None:
    pass


def _runs(labels: list[str]) -> list[tuple[str, int]]:
    """*labels* as (label, how many in a row) runs."""
    runs: list[tuple[str, int]] = []
    for label in labels:
        if runs and runs[-1][0] == label:
            runs[-1] = (label, runs[-1][1] + 1)
        else:
            runs.append((label, 1))
    return runs


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:  # async-only
    try:  # async-only
        return asyncio.get_running_loop() is loop  # async-only
    except RuntimeError:  # async-only
        return False  # async-only
