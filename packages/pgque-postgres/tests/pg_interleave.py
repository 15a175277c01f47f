"""A harness for deterministic interleavings of PostgreSQL sessions (import it from any test).

A PL/pgSQL function cannot be paused between two of its statements, so an interleaving is
forced from outside: a :class:`Holder` (a second session in an open transaction) takes the row
lock or advisory lock that the next statement of the operation under test needs; the operation
is started on a connection of its own with :func:`start`; :meth:`Started.wait_blocked` returns
once that backend is SEEN waiting on a lock in ``pg_stat_activity`` (by pid,
``wait_event_type = 'Lock'``); then a second operation runs "between the two statements", and
the holder lets go. Every wait is bounded: a test that should block but does not, or that should
finish but hangs, fails with a message instead of hanging the run.

Typical use::

    with Holder(url) as holder:
        holder.lock_group(queue, "b")                  # FOR UPDATE: publishers must wait
        op = start(url, lambda t: t.redrive(), queue=queue)
        op.wait_blocked()                              # redrive now sits between statements
        other = start(url, lambda t: t.publish_many(items), queue=queue)
        other.wait_blocked()
    # leaving the block rolls the holder back
    assert op.result() == 2 and other.result() == [...]
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Generic, TypeVar

import psycopg

from pgque.postgres import PostgresTransport

__all__ = [
    "Holder",
    "Started",
    "start",
    "start_on",
    "lock_waits",
    "blocking_pids",
    "group_lock_key",
    "queue_lock_key",
    "DEFAULT_TIMEOUT",
]

T = TypeVar("T")
Conn = psycopg.Connection[tuple[Any, ...]]

#: How long any wait of the harness may take before the test fails (seconds).
DEFAULT_TIMEOUT = 15.0

_LOCK_TIMEOUT = "SELECT set_config('lock_timeout', %s, false)"
_MODES = ("FOR UPDATE", "FOR NO KEY UPDATE", "FOR SHARE", "FOR KEY SHARE")
_GROUP_ROW = {
    mode: f"SELECT 1 FROM pgque_fifo.groups WHERE queue = %s AND group_id = %s {mode}"
    for mode in _MODES
}
_MESSAGE_ROW = {mode: f"SELECT 1 FROM pgque_fifo.messages WHERE id = %s {mode}" for mode in _MODES}
_WAIT = """
SELECT wait_event_type, wait_event FROM pg_stat_activity WHERE pid = %s
"""


def lock_waits(conn: Conn, pid: int) -> tuple[str | None, str | None]:
    """Return (wait_event_type, wait_event) of backend *pid* as seen from *conn* now."""
    row = conn.execute(_WAIT, (pid,)).fetchone()
    if row is None:
        return (None, None)
    return (row[0], row[1])


def blocking_pids(conn: Conn, pid: int) -> list[int]:
    """Return the pids of the backends that block backend *pid* (``pg_blocking_pids``)."""
    row = conn.execute("SELECT pg_blocking_pids(%s)", (pid,)).fetchone()
    return [] if row is None else list(row[0])


def group_lock_key(conn: Conn, queue: str, group_id: str) -> int:
    """Return the advisory lock key pgque's publishes take for (*queue*, *group_id*)."""
    row = conn.execute(
        "SELECT hashtextextended(%s::text || chr(31) || %s::text, 70677175)", (queue, group_id)
    ).fetchone()
    assert row is not None
    return int(row[0])


def queue_lock_key(conn: Conn, queue: str) -> int:
    """Return the advisory lock key that publishes (shared) and purge (exclusive) take."""
    row = conn.execute("SELECT hashtextextended(%s::text, 70677176)", (queue,)).fetchone()
    assert row is not None
    return int(row[0])


class Holder:
    """A second session in an open transaction that holds locks until released.

    Leaving the ``with`` block rolls it back (releasing everything) unless :meth:`commit` or
    :meth:`rollback` ended it first.
    """

    def __init__(self, url: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.url = url
        self.timeout = timeout
        self.conn: Conn = psycopg.connect(url, autocommit=False)
        self.pid: int = self.conn.info.backend_pid
        # A holder that is itself stuck must not hang the run.
        self.conn.execute(_LOCK_TIMEOUT, (f"{int(timeout * 1000)}ms",))

    def __enter__(self) -> Holder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def execute(self, query: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run *query* in the holder's transaction; return its rows (empty if none)."""
        cursor = self.conn.execute(query, params)
        return cursor.fetchall() if cursor.description is not None else []

    def lock_group(self, queue: str, group_id: str, mode: str = "FOR UPDATE") -> None:
        """Lock the group row of (*queue*, *group_id*) in *mode*; fail if there is none.

        ``FOR UPDATE`` stops publishers (they take ``FOR KEY SHARE``) and claims; ``FOR KEY
        SHARE`` is what an in-flight publish holds.
        """
        if mode not in _GROUP_ROW:
            raise ValueError(f"mode must be one of {_MODES}")
        rows = self.execute(_GROUP_ROW[mode], (queue, group_id))
        assert rows, f"no group row {group_id!r} in queue {queue!r} to lock"

    def lock_message(self, message_id: int, mode: str = "FOR UPDATE") -> None:
        """Lock the message row *message_id*; fail if there is none."""
        if mode not in _MESSAGE_ROW:
            raise ValueError(f"mode must be one of {_MODES}")
        rows = self.execute(_MESSAGE_ROW[mode], (message_id,))
        assert rows, f"no message {message_id} to lock"

    def lock_dedup_key(self, queue: str, key: str) -> None:
        """Lock the dedup key row (*queue*, *key*) FOR UPDATE; fail if there is none."""
        rows = self.execute(
            "SELECT 1 FROM pgque_fifo.dedup_keys WHERE queue = %s AND dedup_key = %s FOR UPDATE",
            (queue, key),
        )
        assert rows, f"no dedup key {key!r}"

    def lock_group_advisory(self, queue: str, group_id: str) -> None:
        """Take the transaction-scoped advisory lock publishes into the group queue behind."""
        self.execute(
            "SELECT pg_advisory_xact_lock(%s)", (group_lock_key(self.conn, queue, group_id),)
        )

    def lock_queue(self, queue: str, *, shared: bool = False) -> None:
        """Take the queue's advisory lock: shared (as every publish) or exclusive (as purge)."""
        query = (
            "SELECT pg_advisory_xact_lock_shared(%s)"
            if shared
            else "SELECT pg_advisory_xact_lock(%s)"
        )
        self.execute(query, (queue_lock_key(self.conn, queue),))

    def commit(self) -> None:
        """Commit the holder's transaction (releasing its locks) and start a new one."""
        self.conn.commit()

    def rollback(self) -> None:
        """Roll the holder's transaction back (releasing its locks)."""
        self.conn.rollback()

    def close(self) -> None:
        """Roll back and close the session."""
        if not self.conn.closed:
            try:
                self.conn.rollback()
            finally:
                self.conn.close()


class Started(Generic[T]):
    """An operation running in a thread on a connection of its own (see :func:`start`)."""

    def __init__(
        self,
        conn: Conn,
        work: Callable[[Conn], T],
        *,
        url: str,
        timeout: float,
        close: bool,
    ) -> None:
        self.conn = conn
        self.pid: int = conn.info.backend_pid
        self.url = url
        self.timeout = timeout
        self._close = close
        self._value: T | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(work,), daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[Conn], T]) -> None:
        try:
            self._value = work(self.conn)
        except BaseException as exc:  # handed to the test by result()
            self._error = exc
        finally:
            if self._close:
                self.conn.close()
            self._done.set()

    @property
    def done(self) -> bool:
        """Tell whether the operation has finished (returned or raised)."""
        return self._done.is_set()

    def wait_blocked(self, timeout: float | None = None) -> list[int]:
        """Return once the backend is seen waiting on a lock; return the pids blocking it.

        Fails the test if the operation finished instead (it did not need the lock: the
        interleaving was not forced) or if it was not seen waiting within *timeout*.
        """
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        with psycopg.connect(self.url, autocommit=True) as watcher:
            while True:
                kind, event = lock_waits(watcher, self.pid)
                if kind == "Lock":
                    blockers = blocking_pids(watcher, self.pid)
                    if blockers:
                        return blockers
                if self._done.is_set():
                    detail = f"raised {self._error!r}" if self._error else "returned"
                    raise AssertionError(
                        f"backend {self.pid} {detail} without waiting on a lock "
                        f"(last wait: {kind}/{event})"
                    )
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"backend {self.pid} was not seen waiting on a lock within {limit:g} s "
                        f"(last wait: {kind}/{event})"
                    )
                time.sleep(0.005)

    def result(self, timeout: float | None = None) -> T:
        """Wait for the operation to finish; return its value or re-raise its exception."""
        limit = self.timeout if timeout is None else timeout
        if not self._done.wait(limit):
            raise AssertionError(f"backend {self.pid} did not finish within {limit:g} s")
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def error(self, timeout: float | None = None) -> BaseException | None:
        """Wait for the operation to finish; return the exception it raised, or None."""
        limit = self.timeout if timeout is None else timeout
        if not self._done.wait(limit):
            raise AssertionError(f"backend {self.pid} did not finish within {limit:g} s")
        return self._error


def start_on(
    conn: Conn, work: Callable[[Conn], T], *, url: str, timeout: float = DEFAULT_TIMEOUT
) -> Started[T]:
    """Run ``work(conn)`` in a thread on *conn* (which the caller keeps and closes)."""
    return Started(conn, work, url=url, timeout=timeout, close=False)


def start(
    url: str,
    work: Callable[[PostgresTransport], T],
    *,
    queue: str,
    timeout: float = DEFAULT_TIMEOUT,
    **options: Any,
) -> Started[T]:
    """Run ``work(transport)`` in a thread: a transport of *queue* on a new connection.

    The connection is autocommit (each operation is its own transaction, as on the pool) and
    has a ``lock_timeout``, so a deadlock or a lost wake-up fails the test instead of hanging
    it. It is closed when the work ends. *options* go to :class:`PostgresTransport`.
    """
    conn: Conn = psycopg.connect(url, autocommit=True)
    conn.execute(_LOCK_TIMEOUT, (f"{int(timeout * 1000)}ms",))
    transport = PostgresTransport(conn, queue=queue, setup=False, **options)
    return Started(conn, lambda _conn: work(transport), url=url, timeout=timeout, close=True)
