"""What happened to one claimed message (:class:`Outcome`) and a run's totals
(:class:`WorkerReport`); shared by both runners."""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field

__all__ = ["Outcome", "WorkerReport", "Tally"]


class Outcome(str, enum.Enum):
    """How the worker settled one claimed message.

    - ``ACKED``: the handler returned and the ack took effect.
    - ``RETRIED``: the handler raised (or raised :class:`Retry`); the message was nacked with a
      delay and will be delivered again (under ``on_exhausted="block"``, after its last
      attempt, once an operator unblocks its group).
    - ``DEAD_LETTERED``: the handler raised :class:`Reject`; the message is in the dead-letter
      store. Also a failure or timeout on the message's last attempt (``max_attempts``)
      under ``on_exhausted="dead_letter"``: nacked, it is dead-lettered by the transport at
      the next claim.
    - ``TIMED_OUT``: the handler overran ``hard_timeout`` and was stopped; the message was
      nacked with a ``TimeoutError`` as its error and the retry policy's delay, so it is
      delivered again (the attempt counts). The hooks and metrics see this outcome; the
      :class:`WorkerReport` counts it among ``retried`` (``timed_out`` says how many of the
      retried and dead-lettered were timeouts).
    - ``RELEASED``: shutdown came before the handler finished (or started); the message was
      released (``release``): back at once for another worker, the attempt not counted.
    - ``LOST``: the lease was no longer held when the worker settled it (it expired and may
      have been reclaimed), or a lost connection left the settle's effect unknown.
    """

    ACKED = "acked"
    RETRIED = "retried"
    DEAD_LETTERED = "dead_lettered"
    TIMED_OUT = "timed_out"
    RELEASED = "released"
    LOST = "lost"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class WorkerReport:
    """The totals of one :meth:`Worker.run`: messages claimed, one count per outcome,
    transport errors met (and survived) and the run's wall time.

    Every claimed message ends in exactly one of the outcomes:
    ``claimed == acked + retried + dead_lettered + released + lost`` after every run.
    ``timed_out`` is not one more outcome: it counts the messages, among ``retried`` and
    ``dead_lettered``, whose handler was stopped at ``hard_timeout``.
    """

    claimed: int = 0
    acked: int = 0
    retried: int = 0
    dead_lettered: int = 0
    timed_out: int = 0
    released: int = 0
    lost: int = 0
    errors: int = 0
    elapsed_s: float = 0.0
    counts: dict[Outcome, int] = field(default_factory=dict, compare=False, repr=False)

    @property
    def settled(self) -> int:
        """Return how many claimed messages reached an outcome."""
        return self.acked + self.retried + self.dead_lettered + self.released + self.lost

    def as_dict(self) -> dict[str, float]:
        """Return the report as plain JSON-able numbers (for logs and the command line)."""
        out: dict[str, float] = {"claimed": self.claimed}
        for name in ("acked", "retried", "dead_lettered", "timed_out", "released", "lost"):
            out[name] = getattr(self, name)
        out["errors"] = self.errors
        out["elapsed_s"] = round(self.elapsed_s, 6)
        return out


class Tally:
    """Thread-safe counters behind a :class:`WorkerReport`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.claimed = 0
        self.errors = 0
        self.counts: dict[Outcome, int] = dict.fromkeys(Outcome, 0)
        #: handlers stopped at hard_timeout (each also counted retried or dead-lettered)
        self.timeouts = 0

    def add_claimed(self, n: int) -> None:
        """Count *n* claimed messages."""
        with self._lock:
            self.claimed += n

    def add_error(self) -> None:
        """Count one transport error."""
        with self._lock:
            self.errors += 1

    def add(self, outcome: Outcome, *, timed_out: bool = False) -> None:
        """Count one settled message (*timed_out*: its handler was stopped at hard_timeout).

        A ``TIMED_OUT`` outcome counts as ``RETRIED``, the timeout separately."""
        with self._lock:
            self.counts[Outcome.RETRIED if outcome is Outcome.TIMED_OUT else outcome] += 1
            if timed_out or outcome is Outcome.TIMED_OUT:
                self.timeouts += 1

    def report(self, elapsed_s: float) -> WorkerReport:
        """Return a snapshot as a :class:`WorkerReport`."""
        with self._lock:
            counts = dict(self.counts)
            return WorkerReport(
                claimed=self.claimed,
                acked=counts[Outcome.ACKED],
                retried=counts[Outcome.RETRIED],
                dead_lettered=counts[Outcome.DEAD_LETTERED],
                timed_out=self.timeouts,
                released=counts[Outcome.RELEASED],
                lost=counts[Outcome.LOST],
                errors=self.errors,
                elapsed_s=elapsed_s,
                counts=counts,
            )
