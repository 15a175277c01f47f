"""Running: a worker's handler runs on one lease at a time per slot, here.

The handler runner starts the handler on a lease (in a thread, as an asyncio task for an
async handler of an AsyncWorker, or in a child process with ``isolation="process"``), renews
the leases its slot holds while it runs, reports a handler that runs past ``warn_after``,
stops one past ``hard_timeout`` or at the end of the shutdown grace (a thread cannot be
stopped: its lease is kept until it returns), and turns how the handler ended into the
finished lease (:class:`~pgque.core.worker._settling.decisions.Finished`) that the worker
hands to settling. It never claims and never settles.
"""

# The source of its blocking twin, runner_sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import asyncio  # async-only

# sync: import concurrent.futures
import time
from typing import Any

from pgque.core.contract import AsyncTransport
from pgque.core.models import Lease
from pgque.core.transport_options import OnExhausted
from pgque.core.worker._logs import lease_fields, log
from pgque.core.worker._options import WorkerOptions
from pgque.core.worker._outcome import Outcome
from pgque.core.worker._policy import StopWorker
from pgque.core.worker._report import RunReport
from pgque.core.worker._running.ending import (
    Due,
    Lost,
    StopBy,
    arrives_late,
    due,
    ended,
    failure_note,
    leave_running,
    next_wake,
    stop_by,
    stuck,
    take,
    timed_out_decision,
)
from pgque.core.worker._running.handlers import Handler, consume_result, handler_error
from pgque.core.worker._running.held import Held
from pgque.core.worker._running.processes import (
    CHILD_POLL_S,
    HandlerCall,
    HandlerKilled,
    hard_deadline,
)
from pgque.core.worker._settling.decisions import Decision, Finished

__all__ = ["AsyncHandlerRunner"]


class AsyncHandlerRunner:
    """Run *handler* on the leases of one worker run (see the module docstring).

    *transport* renews leases (``extend``); *report* counts what happened; *max_attempts* and
    *on_exhausted* are the transport's (how a failure on the last attempt is said and
    counted); *abort* and *abandon* are the run's: once *abort* is done handlers are stopped,
    once *abandon* is done handlers that cannot be are left running.
    """

    def __init__(
        self,
        handler: Handler,
        transport: AsyncTransport,
        options: WorkerOptions,
        report: RunReport,
        *,
        max_attempts: int | None,
        on_exhausted: OnExhausted,
        abort: asyncio.Future[None],
        abandon: asyncio.Future[None],
    ) -> None:
        self._handler = handler
        self._transport = transport
        self._options = options
        self._report = report
        self._max_attempts = max_attempts
        self._on_exhausted = on_exhausted
        self._abort = abort
        self._abandon = abandon

    def dead_on_arrival(self, held: Held, key: int) -> bool:
        """Return True (and log it) if lease *key* of *held* may have ended already by the
        worker's clock, counted from when its claim (or last renewal) was sent: another worker
        may hold its message now, so its handler must not start. It is released (fenced: a
        no-op if it is gone) rather than run (:func:`~.ending.arrives_late` judges)."""
        left = arrives_late(held, time.monotonic(), self._options.visibility)
        if left is None:
            return False
        lease = held.held[key]
        log.warning(
            "worker %s: lease of message %s of group %s arrived with %.3f s left of its "
            "visibility (%gs, counted from when the claim was sent); not started",
            self._report.name,
            lease.message_id,
            lease.group_id,
            left,
            self._options.visibility,
            extra=lease_fields(lease),
        )
        return True

    def finish(self, held: Held, key: int, decision: Decision, started: float) -> Finished | None:
        """Take lease *key* out of *held* to be settled by *decision* (its handler started at
        *started*; 0: it never ran); None if it was lost (counted here; :func:`~.ending.take`
        says how)."""
        taken = take(held, key, decision, started, time.monotonic(), self._on_exhausted)
        if isinstance(taken, Lost):
            self._report.finished(taken.outcome, taken.started, taken.lease, taken.timed_out)
            return None
        return taken

    async def handle(self, held: Held, key: int) -> tuple[Finished | None, StopWorker | None]:
        """Run the handler on lease *key* of *held*, renewing the leases held; return what to
        settle (None: the lease was lost, and counted) and the :class:`StopWorker` the handler
        raised (the worker must stop for it; its message is released).

        A lease is never given up while its handler may still run: at the end of the shutdown
        grace, or past *hard_timeout*, an asyncio task is cancelled and awaited; a handler in a
        thread cannot be stopped, so its lease is kept (renewed) until the thread returns, and
        reported (a warning naming the group, :meth:`WorkerHooks.on_unstoppable`).
        """
        opts = self._options
        lease = held.held[key]
        started = time.monotonic()
        task, call = self._start_handler(lease)
        deadline = hard_deadline(opts.hard_timeout, started, call)
        warn_at = None if opts.warn_after is None else started + opts.warn_after
        #: what to settle once the handler is over, when it was given up (grace, timeout)
        given_up: Decision | None = None
        while not task.done():
            limit = deadline if given_up is None else None
            starting = call is not None and call.begun_at is None  # its child is starting
            poll = CHILD_POLL_S if starting else None
            wake = next_wake(time.monotonic(), held.next_renewal, limit, warn_at, poll)
            waited = {task, self._abandon} if given_up else {task, self._abort}
            await asyncio.wait(
                waited,
                timeout=max(wake - time.monotonic(), 0.0),
                return_when=asyncio.FIRST_COMPLETED,
            )
            if task.done():
                break
            deadline = hard_deadline(opts.hard_timeout, started, call)
            gone = self._abandon.done()
            step = due(given_up is not None, gone, self._abort.done(), deadline, time.monotonic())
            if step is Due.LEAVE and given_up is not None:
                self._left_running(held, key, started)  # counted lost; never waited for
                return self.finish(held, key, given_up, started), None
            if step is Due.RELEASE:
                given_up = Decision(Outcome.RELEASED)
                self._give_up(task, call, lease, started, "the shutdown grace is over")
            elif step is Due.TIME_OUT:
                given_up = self._timed_out(lease)
                self._give_up(
                    task, call, lease, started, f"it overran hard_timeout ({opts.hard_timeout:g}s)"
                )
            if warn_at is not None and time.monotonic() >= warn_at:
                warn_at = self._stuck(lease, started, warn_at)
            if time.monotonic() >= held.next_renewal:
                await self._renew(held)
        error = handler_error(task)
        stopped = task.cancelled() or isinstance(error, HandlerKilled)
        end = ended(given_up, error, stopped, lease, opts.retry, self._max_attempts)
        if end.failure is not None:
            self._log_failure(lease, end.failure, end.decision)
        return self.finish(held, key, end.decision, started), end.stop

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
        reported (:func:`~.ending.stop_by` says which)."""
        how = stop_by(call is not None, self._can_stop_handlers())
        if how is StopBy.KILL and call is not None:
            log.warning(
                "worker %s: killing the process running the handler of message %s of group %s (%s)",
                self._report.name,
                lease.message_id,
                lease.group_id,
                why,
                extra=lease_fields(lease),
            )
            call.stop()
            return
        if how is StopBy.CANCEL:
            task.cancel()
            return
        running = time.monotonic() - started
        log.warning(
            "worker %s: the handler of message %s of group %s must stop (%s) but runs in a "
            "thread, which cannot be stopped: its lease is kept (renewed) until it returns "
            "(%.1f s so far)",
            self._report.name,
            lease.message_id,
            lease.group_id,
            why,
            running,
            extra=lease_fields(lease, running_s=running),
        )
        self._report.hooks.unstoppable(lease, running)

    def _left_running(self, held: Held, key: int, started: float) -> None:
        """Leave the handler of lease *key* running as the run ends without it: its lease is
        neither renewed nor released (the handler may still act), so it expires, and that
        expiry counts an attempt of the message; it is counted lost."""
        lease = leave_running(held, key)
        log.warning(
            "worker %s: leaving the handler of message %s of group %s running in its thread "
            "after %.1f s: its lease is left to expire (the expiry counts an attempt)",
            self._report.name,
            lease.message_id,
            lease.group_id,
            time.monotonic() - started,
            extra=lease_fields(lease),
        )

    def _can_stop_handlers(self) -> bool:
        """Whether a running handler can be stopped: an asyncio task can be cancelled, a
        thread cannot."""
        return self._handler.is_async  # async-only
        # sync: return False

    def _start_handler(self, lease: Lease) -> tuple[asyncio.Future[Any], HandlerCall | None]:
        """Start the handler on *lease*; return its future and, when it runs in a child
        process, the call that can kill it."""
        args = self._handler.args(lease)
        handler = self._report.tracing.start(lease, self._handler.fn)  # its span current inside
        task: asyncio.Future[Any]
        processes = self._handler.processes
        if processes is not None:  # the span covers the call; not current in the child
            future, call = processes.submit(*args)
            task = asyncio.wrap_future(future)  # async-only
            # sync: task = future
            task.add_done_callback(consume_result)
            return task, call
        if self._handler.is_async:  # async-only
            task = asyncio.ensure_future(handler(*args))  # async-only
        else:  # async-only
            thread = self._handler.threads.submit(handler, *args)  # async-only
            task = asyncio.wrap_future(thread)  # async-only
        # sync: task = self._handler.threads.submit(handler, *args)
        task.add_done_callback(consume_result)
        return task, None

    async def _renew(self, held: Held) -> None:
        """Extend every lease *held* still holds; note the ones found lost."""
        opts = self._options
        sent = time.monotonic()
        failed = False
        for key, lease in list(held.held.items()):
            if key in held.lost:
                continue
            try:
                renewed = await self._transport.extend(lease, opts.visibility)
            except Exception as exc:
                self._report.transport_error(exc, lease, "extend")
                failed = True
                continue
            self._report.reach.reached(sent)
            if renewed is None:
                log.warning(
                    "worker %s: lease of message %s was lost (expired and maybe reclaimed)",
                    self._report.name,
                    lease.message_id,
                    extra=lease_fields(lease),
                )
                held.lost.add(key)
            else:
                held.held[key] = renewed
        if failed:
            held.renewal_failed(time.monotonic(), opts)
        else:
            held.renewed(sent, opts)

    def _stuck(self, lease: Lease, started: float, warn_at: float) -> float:
        """Report a handler running past ``warn_after``; return when to report it next."""
        every = self._options.warn_after or 0.0
        running, following = stuck(started, warn_at, every, time.monotonic())
        log.warning(
            "worker %s: handler still running after %.1f s (warn_after %gs) on message %s "
            "of group %s (attempt %d)",
            self._report.name,
            running,
            every,
            lease.message_id,
            lease.group_id,
            lease.attempt,
            extra=lease_fields(lease, running_s=running),
        )
        self._report.hooks.stuck(lease, running)
        return following

    def _timed_out(self, lease: Lease) -> Decision:
        """Decide for a handler stopped at its hard timeout (settling's ``timed_out``), and log
        it; the nack is sent once the handler is over (a thread that cannot be stopped keeps
        its lease until then).
        """
        opts = self._options
        limit = opts.hard_timeout
        decision, follows = timed_out_decision(
            limit, lease, opts.retry, self._max_attempts, self._on_exhausted
        )
        log.warning(
            "worker %s: handler overran hard_timeout (%gs) on message %s of group %s "
            "(attempt %d); %s",
            self._report.name,
            limit,
            lease.message_id,
            lease.group_id,
            lease.attempt,
            follows,
            extra=lease_fields(lease, outcome=Outcome.TIMED_OUT.value),
        )
        return decision

    def _log_failure(self, lease: Lease, error: BaseException, decision: Decision) -> None:
        """Log the failure of the handler on *lease* as :func:`~.ending.failure_note` says."""
        note = failure_note(lease, error, decision, self._on_exhausted, self._max_attempts)
        log.log(
            note.level,
            "worker %s: " + note.text,
            self._report.name,
            *note.args,
            exc_info=note.traceback,
            extra=lease_fields(lease, outcome=decision.outcome.value),
        )
