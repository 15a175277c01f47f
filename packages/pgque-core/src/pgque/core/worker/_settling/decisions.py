"""How a finished lease is settled, decided without I/O: the :class:`Decision` a handler's
return or exception leads to (the retry policy, ``max_attempts``), the :class:`Settlement` that
carries it out, how the run's report counts it, and what becomes of a settlement whose round
trip failed or whose reply was lost."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pgque.core.errors import ConnectionLost, RetryableConflict
from pgque.core.models import GroupInfo, Lease, Settlement
from pgque.core.transport_options import OnExhausted
from pgque.core.worker._outcome import Outcome
from pgque.core.worker._policy import Reject, Retry, RetryPolicy

__all__ = [
    "Decision",
    "Finished",
    "Unused",
    "SETTLE_VERB",
    "decide",
    "is_final_attempt",
    "is_timed_out",
    "counted_outcome",
    "answered_outcome",
    "settles_again",
    "split_failed",
    "split_known",
    "took_effect",
    "settlement_for",
    "released",
    "max_attempts_of",
    "on_exhausted_of",
    "exhausted_text",
    "timed_out",
]


#: How logs name what a decision does to a lease ("could not ack message 7").
SETTLE_VERB: dict[Outcome, str] = {
    Outcome.ACKED: "ack",
    Outcome.RETRIED: "nack",
    Outcome.RELEASED: "release",
    Outcome.DEAD_LETTERED: "dead-letter",
    Outcome.TIMED_OUT: "nack (timed out)",
}


def settlement_for(lease: Lease, decision: Decision) -> Settlement:
    """Return the :class:`Settlement` carrying out *decision* on *lease*."""
    outcome = decision.outcome
    if outcome is Outcome.ACKED:
        return Settlement(lease, "ack")
    if outcome is Outcome.RELEASED:
        return Settlement(lease, "release")
    if outcome is Outcome.DEAD_LETTERED:
        return Settlement(lease, "dead_letter", reason=decision.reason, error=decision.error)
    return Settlement(lease, "nack", delay=decision.delay, error=decision.error)


def max_attempts_of(transport: object) -> int | None:
    """Return *transport*'s ``max_attempts``; None (unlimited) where it does not say."""
    value = getattr(transport, "max_attempts", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def on_exhausted_of(transport: object) -> OnExhausted:
    """Return *transport*'s ``on_exhausted`` policy (dead_letter where it has none)."""
    value = getattr(transport, "on_exhausted", "dead_letter")
    return "block" if value == "block" else "dead_letter"


@dataclass(frozen=True)
class Decision:
    """What to do with a message after its handler finished.

    *error* is what the handler raised (recorded by the transport: ``nack(error=)``,
    ``dead_letter(error=)``); *final* marks a retry on the message's last attempt, after
    which the transport dead-letters it or blocks its group.
    """

    outcome: Outcome
    delay: float = 0.0
    reason: str = ""
    error: BaseException | None = None
    final: bool = False


def is_final_attempt(attempt: int, max_attempts: int | None) -> bool:
    """Return True if delivery *attempt* is the last one ``max_attempts`` allows."""
    return max_attempts is not None and attempt >= max_attempts


def decide(
    error: BaseException | None,
    lease: Lease,
    policy: RetryPolicy,
    max_attempts: int | None = None,
) -> Decision:
    """Return the decision for a handler that returned (*error* None) or raised *error*.

    A failure on the last attempt *max_attempts* allows is nacked without delay: no retry
    follows, so waiting would only hold the group longer before the transport applies its
    ``on_exhausted`` policy at the next claim.
    """
    if error is None:
        return Decision(Outcome.ACKED)
    if isinstance(error, Reject):
        return Decision(Outcome.DEAD_LETTERED, reason=error.reason, error=error)
    if is_final_attempt(lease.attempt, max_attempts):
        return Decision(Outcome.RETRIED, error=error, final=True)
    if isinstance(error, Retry) and error.delay is not None:
        return Decision(Outcome.RETRIED, delay=error.delay, error=error)
    return Decision(Outcome.RETRIED, delay=policy.delay(lease.attempt), error=error)


def timed_out(
    limit: float | None, lease: Lease, policy: RetryPolicy, max_attempts: int | None = None
) -> Decision:
    """Return the decision for a handler stopped at its hard timeout (*limit* seconds).

    The message is nacked with a TimeoutError naming the limit (so that the failure is
    recorded and the attempt counts), with the retry policy's delay, or none on its last
    attempt, as :func:`decide` says for any failure.
    """
    error = TimeoutError(f"handler overran hard_timeout ({limit:g}s); stopped")
    retry = decide(error, lease, policy, max_attempts)
    return Decision(Outcome.TIMED_OUT, delay=retry.delay, error=error, final=retry.final)


def counted_outcome(outcome: Outcome, decision: Decision, on_exhausted: OnExhausted) -> Outcome:
    """Return how the report counts a lease that ended in *outcome* after *decision*.

    A failure (or a timeout) on the message's last attempt is nacked, and the transport then
    dead-letters the message at the next claim (``on_exhausted="dead_letter"``): it is
    counted ``DEAD_LETTERED``, as every dead letter a lease of the worker ended in. With
    ``"block"`` the message stays at its group's head, to be delivered again once an
    operator unblocks it: it keeps its count (``RETRIED``, ``TIMED_OUT``). Any other
    outcome (a lost nack, an ack) is counted as it is.
    """
    final = decision.final and outcome in (Outcome.RETRIED, Outcome.TIMED_OUT)
    if final and on_exhausted == "dead_letter":
        return Outcome.DEAD_LETTERED
    return outcome


def answered_outcome(decision: Decision, done: bool, on_exhausted: OnExhausted) -> Outcome:
    """Return how the report counts a settlement the store answered: by *decision*'s outcome
    when it took effect (*done*), else ``LOST`` (its lease was gone), except that a timed-out
    handler's stays ``TIMED_OUT`` (its lease ends either way); then as
    :func:`counted_outcome` says."""
    outcome = decision.outcome if done or is_timed_out(decision) else Outcome.LOST
    return counted_outcome(outcome, decision, on_exhausted)


def settles_again(error: BaseException, aborted: bool, now: float, finished: Finished) -> bool:
    """Return True if *finished*, whose round trip failed with *error*, waits for the next
    one: after a lost connection or a conflict, while the run is not *aborted* and its lease
    lasts (*now* on the local monotonic clock). Otherwise it is counted lost."""
    retryable = isinstance(error, (ConnectionLost, RetryableConflict))
    return retryable and not aborted and now < finished.expires_at


def split_failed(
    finished: list[Finished], error: BaseException, aborted: bool, now: float
) -> tuple[list[Finished], list[Finished]]:
    """Split *finished*, whose round trip failed with *error* at *now*: return those that
    wait for the next round trip (:func:`settles_again`), and those counted lost."""
    again: list[Finished] = []
    lost: list[Finished] = []
    for item in finished:
        (again if settles_again(error, aborted, now, item) else lost).append(item)
    return again, lost


def split_known(
    finished: list[Finished], known: Sequence[bool | None]
) -> tuple[list[tuple[Finished, bool]], list[Finished]]:
    """Split *finished* by *known*, each one's result where it is known (a call over shards
    that failed on some of them): return those known, each with its result, and the rest."""
    answered: list[tuple[Finished, bool]] = []
    rest: list[Finished] = []
    for item, done in zip(finished, known, strict=True):
        if done is None:
            rest.append(item)
        else:
            answered.append((item, done))
    return answered, rest


def took_effect(finished: Finished, info: GroupInfo | None) -> bool:
    """Return whether *finished*'s settlement, sent before a lost reply and answered False
    when sent again, took effect the first time, by *info*, its group as the store shows it
    now (None: gone). An ack or a dead letter took effect if the message left the group's
    head; a nack or a release if the message is still the head and no lease holds the
    group."""
    lease = finished.lease
    gone = info is None or info.head_message_id != lease.message_id
    if finished.decision.outcome in (Outcome.ACKED, Outcome.DEAD_LETTERED):
        return gone
    return not gone and info is not None and info.state != "leased"


def is_timed_out(decision: Decision) -> bool:
    """Return True if *decision* is that of a handler stopped at its hard timeout."""
    return decision.outcome is Outcome.TIMED_OUT


def exhausted_text(on_exhausted: OnExhausted, max_attempts: int | None) -> str:
    """Return what the transport does to a message whose last attempt failed, for logs."""
    if on_exhausted == "block":
        return (
            f"it was the last of max_attempts ({max_attempts}): its group "
            "will be blocked (`pgque unblock` releases it)"
        )
    return f"it was the last of max_attempts ({max_attempts}): it will be dead-lettered"


class Finished:
    """A lease whose handler is done (or that is given up), with what to do with it."""

    __slots__ = ("ambiguous", "decision", "expires_at", "lease", "started")

    def __init__(self, lease: Lease, decision: Decision, started: float, expires_at: float):
        self.lease = lease
        self.decision = decision
        self.started = started
        #: the lease's end by the local clock (its settlement is retried until then)
        self.expires_at = expires_at
        #: a call carrying it failed after it was sent (``maybe_applied``): a later False
        #: may mean it took effect then, so the store is asked before it is called lost
        self.ambiguous = False


class Unused(Finished):
    """A buffered lease no slot took: given back unhandled (released)."""

    __slots__ = ()


def released(lease: Lease, now: float, expires_at: float) -> Finished:
    """Return a buffered lease given back unhandled, to be settled (released)."""
    return Unused(lease, Decision(Outcome.RELEASED), now, expires_at)
