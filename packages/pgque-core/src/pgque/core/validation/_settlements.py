"""Checks of what settles a message: leases (of this queue, store and backend), settlements,
dead-letter reasons and recorded errors."""

from __future__ import annotations

from dataclasses import dataclass

from pgque.core.errors import InvalidInput
from pgque.core.models import ErrorInfo, Lease, Settlement, SettleOutcome
from pgque.core.validation._limits import MAX_BATCH, MAX_REASON_CHARS
from pgque.core.validation._numbers import check_seconds

__all__ = [
    "check_reason",
    "check_error",
    "exhausted_reason",
    "check_lease",
    "check_store",
    "check_backend",
    "CheckedSettlement",
    "check_settlements",
]


def check_reason(reason: object) -> str:
    """Return *reason* if it is a str of at most 2,000 characters without NUL."""
    if not isinstance(reason, str):
        raise InvalidInput(f"reason must be a str, not {type(reason).__name__}")
    if "\x00" in reason or len(reason) > MAX_REASON_CHARS:
        raise InvalidInput(f"reason must be at most {MAX_REASON_CHARS} characters, without NUL")
    try:
        reason.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput("reason must be valid Unicode (no lone surrogates)") from exc
    return reason


def check_error(error: object, at: float) -> ErrorInfo | None:
    """Return the bounded ErrorInfo for *error* (an exception, a str, an ErrorInfo or None).

    An ErrorInfo given whole is bounded again (its own ``at`` is kept). Raises InvalidInput
    for anything else.
    """
    if error is None:
        return None
    if isinstance(error, ErrorInfo):
        return error.bounded()
    if isinstance(error, (BaseException, str)):
        return ErrorInfo.capture(error, at)
    raise InvalidInput(
        f"error must be an exception, a str, an ErrorInfo or None, not {type(error).__name__}"
    )


def exhausted_reason(max_attempts: int) -> str:
    """The dead-letter reason when *max_attempts* ran out: ``max_attempts (N) exhausted``."""
    return f"max_attempts ({max_attempts}) exhausted"


def check_lease(lease: object, queue: str, origin: str | None) -> Lease:
    """Return *lease* if it was issued by this queue and this store (*origin*; None: the
    store is checked apart, once the transport knows which it is)."""
    if not isinstance(lease, Lease):
        raise InvalidInput(f"expected a Lease, not {type(lease).__name__}")
    if lease.queue != queue:
        raise InvalidInput(
            f"this lease belongs to queue {lease.queue!r} of another transport, "
            f"not to queue {queue!r} here"
        )
    if origin is not None:
        check_store(lease, origin)
    return lease


def check_store(lease: Lease, origin: str) -> Lease:
    """Return *lease* (already checked by :func:`check_lease`) if it was issued by the store
    whose leases carry *origin*."""
    if lease.origin != origin:
        raise InvalidInput(
            f"this lease belongs to another transport: it was issued by another store "
            f"({lease.origin or 'unknown'}), not by this one ({origin}), though for a queue "
            f"of the same name {lease.queue!r}"
        )
    return lease


def check_backend(lease: Lease, backend: str) -> Lease:
    """Return *lease* if its origin names *backend* (``backend:<store>``): a lease of another
    backend is refused without I/O, before the transport has learnt which store it is."""
    if not lease.origin.startswith(backend + ":"):
        raise InvalidInput(
            f"this lease belongs to another transport: it was issued by another backend "
            f"({lease.origin or 'unknown'}), not by {backend}"
        )
    return lease


@dataclass(frozen=True, slots=True)
class CheckedSettlement:
    """A :class:`Settlement` whose fields were checked: what a backend applies."""

    lease: Lease
    outcome: SettleOutcome
    delay: float
    reason: str
    error: ErrorInfo | None
    #: True when *error*'s ``at`` is only the client's stand-in and the store's clock is to
    #: fill it in (no injected clock, and the error was not given as a whole ErrorInfo)
    store_clock: bool = False


_OUTCOMES: frozenset[str] = frozenset(("ack", "nack", "release", "dead_letter"))


def check_settlements(
    settlements: object,
    queue: str,
    origin: str | None,
    at: float,
    *,
    store_clock: bool = False,
) -> list[CheckedSettlement]:
    """Return *settlements* checked, in order (errors captured at *at*, epoch seconds; with
    *store_clock*, marked for the store's clock to time them: ``CheckedSettlement.store_clock``).

    Raises InvalidInput for something that is not a sequence of Settlement, more than 10,000
    of them, a lease of another queue or store, an unknown outcome, or a bad delay, reason or
    error; *delay* is only allowed on a nack, *reason* and *error* only where they apply.
    """
    if isinstance(settlements, (str, bytes)) or not isinstance(settlements, (list, tuple)):
        raise InvalidInput(
            f"settlements must be a list of Settlement, not {type(settlements).__name__}"
        )
    if len(settlements) > MAX_BATCH:
        raise InvalidInput(f"at most {MAX_BATCH} settlements per call, not {len(settlements)}")
    out: list[CheckedSettlement] = []
    for item in settlements:
        if not isinstance(item, Settlement):
            raise InvalidInput(f"expected a Settlement, not {type(item).__name__}")
        lease = check_lease(item.lease, queue, origin)
        outcome = item.outcome
        if outcome not in _OUTCOMES:
            raise InvalidInput(
                f"a settlement's outcome is ack, nack, release or dead_letter, not {outcome!r}"
            )
        delay = check_seconds(item.delay, "delay")
        if delay and outcome != "nack":
            raise InvalidInput(f"only a nack takes a delay (this settlement is {outcome})")
        reason = check_reason(item.reason)
        if reason and outcome != "dead_letter":
            raise InvalidInput(f"only a dead_letter takes a reason (this settlement is {outcome})")
        error = check_error(item.error, at)
        if error is not None and outcome not in ("nack", "dead_letter"):
            raise InvalidInput(
                f"only a nack or a dead_letter records an error (this settlement is {outcome})"
            )
        timed_by_store = store_clock and error is not None and not isinstance(item.error, ErrorInfo)
        out.append(CheckedSettlement(lease, outcome, delay, reason, error, timed_by_store))
    return out
