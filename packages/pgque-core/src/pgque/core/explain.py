"""Why a group is or is not moving, in one plain sentence: :func:`explain`; whether a queue
was ever used: :func:`never_used`.

The sentence ``pgque group`` ends with and the dashboard's group page shows. This module needs
nothing beyond pgque-core itself (no click, no web framework).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from datetime import datetime, timezone

from pgque.core.contract import AsyncSupportsQueues, AsyncTransport, SupportsQueues, Transport
from pgque.core.fairness import key_label
from pgque.core.models import GroupInfo, KeyInfo, QueueStats

__all__ = [
    "explain",
    "key_hold",
    "ready_ahead",
    "age_text",
    "clock_text",
    "relative_text",
    "never_used",
    "never_used_async",
    "never_used_text",
    "KNOWN_QUEUES_SHOWN",
]

#: How many of the store's queues a :func:`never_used` sentence names.
KNOWN_QUEUES_SHOWN = 10


def age_text(seconds: float | None) -> str:
    """Return a duration for tables and sentences: ``41.0 s``, ``2.5 min``, ``1.2 h``.

    ``-`` for None. Raises nothing.
    """
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def clock_text(epoch: float, now: float) -> str:
    """Return *epoch* as ``12:03:07 UTC`` on the day of *now*, else with its date."""
    moment = datetime.fromtimestamp(epoch, timezone.utc)
    today = datetime.fromtimestamp(now, timezone.utc).date()
    if moment.date() == today:
        return moment.strftime("%H:%M:%S UTC")
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def relative_text(epoch: float, now: float) -> str:
    """Return *epoch* relative to *now*: ``now``, ``in 2.0 s`` or ``3.5 min ago``."""
    delta = epoch - now
    if abs(delta) < 0.05:
        return "now"
    return f"in {age_text(delta)}" if delta > 0 else f"{age_text(-delta)} ago"


def _holder(info: GroupInfo) -> str:
    return info.lease_holder if info.lease_holder is not None else "a claim without a holder"


def ready_ahead(stats: QueueStats) -> int:
    """Return how many other groups are ready, from *stats*: at most that many are served
    before a ready group (an estimate: claims go to the group served longest ago)."""
    ready = stats.groups - stats.paused - stats.blocked - stats.in_flight - stats.parked
    return max(ready - 1, 0)


def key_hold(key: KeyInfo, now: float) -> str | None:
    """Why claims pass over every group of *key* now (at its cap, out of tokens), or None."""
    name = key_label(key.key)
    policy = key.policy
    if policy.max_in_flight is not None and key.in_flight >= policy.max_in_flight:
        return (
            f"its key {name} has {key.in_flight} of {policy.max_in_flight} in flight: it waits "
            "until one of them is settled or its lease expires"
        )
    if key.next_token_at is not None and policy.rate is not None:
        return (
            f"its key {name} is out of tokens ({policy.rate:g} per {policy.per:g} s): the next "
            f"comes at {clock_text(key.next_token_at, now)} "
            f"({relative_text(key.next_token_at, now)})"
        )
    return None


def explain(
    info: GroupInfo, *, now: float, ahead: int | None = None, key: KeyInfo | None = None
) -> str:
    """Return one plain sentence saying why group *info* is or is not moving.

    *now* is the current time (epoch seconds); *ahead* the estimate of :func:`ready_ahead`
    for a ready group (None: not known); *key* the group's fairness key as ``keys()`` shows
    it, which names a key at its cap or out of tokens (docs/fairness.md). The sentence names
    the ``pgque`` command that acts on the group, its id quoted for a shell. Raises nothing.
    """
    quoted = shlex.quote(info.group_id)
    error = info.last_error
    failed = "" if error is None else f" failed with {error.summary()}"
    if info.state == "paused":
        sentence = f"paused by an operator: no claim leases it until `pgque resume {quoted}`"
        if info.lease_expires_at is not None and info.lease_expires_at > now:
            sentence += (
                f"; the lease of {_holder(info)} (until {clock_text(info.lease_expires_at, now)})"
                " finishes normally"
            )
        if info.depth == 0:
            sentence += " (it holds no messages yet; publishes still append)"
        return sentence
    if info.state == "blocked":
        since = "" if error is None else f" since {clock_text(error.at, now)}"
        last = " (no error was recorded)" if error is None else f", the last attempt{failed}"
        return (
            f"blocked{since}: max_attempts ({info.head_attempts}) exhausted{last} — "
            f"run `pgque unblock {quoted}` to retry its head, or "
            f"`pgque unblock {quoted} --drop-head` to move it to the dead letters"
        )
    if info.state == "leased" and info.lease_expires_at is not None:
        sentence = (
            f"leased by {_holder(info)} until {clock_text(info.lease_expires_at, now)} "
            f"({relative_text(info.lease_expires_at, now)}): attempt {info.head_attempts} "
            "is running"
        )
        if error is not None:
            sentence += f"; an earlier attempt{failed}"
        return sentence
    if info.state == "parked" and info.resume_at is not None:
        after = (
            f" after attempt {info.head_attempts}{failed}"
            if error is not None
            else f" after attempt {info.head_attempts} (no error was recorded)"
        )
        return (
            f"parked until {clock_text(info.resume_at, now)} "
            f"({relative_text(info.resume_at, now)}){after}"
        )
    # ready
    held = None if key is None else key_hold(key, now)
    if held is not None:
        return f"ready, but {held}"
    if info.lease_expires_at is not None:
        return (
            f"ready: the lease of {_holder(info)} expired at "
            f"{clock_text(info.lease_expires_at, now)} (its worker may have stopped or died); "
            f"the next claim delivers its head again, as attempt {info.head_attempts + 1}"
        )
    if ahead is None:
        waiting = "the next claims serve it in their round-robin turn"
    elif ahead == 0:
        waiting = "the next claim serves it (no other group is ready)"
    else:
        waiting = (
            f"about {ahead} other ready group{'s' if ahead != 1 else ''} may be served before "
            "it (an estimate from the queue's counts: claims go to the group served longest ago)"
        )
    sentence = f"ready: {waiting}"
    if error is not None:
        sentence += f"; attempt {info.head_attempts}{failed}"
    return sentence


def never_used_text(
    queue: str, stats: QueueStats, known: Sequence[str] | None, *, where: str = ""
) -> str | None:
    """Return the sentence saying that *queue* has never been used, or None if it has been.

    A queue has never been used when its *stats* show no group (a paused empty one counts),
    no dead letter and no scheduled message, and the store's queue list *known* (sorted,
    from ``queues()``) does not name it. With *known* None (a transport that cannot list its
    queues) nothing can be told: None. *where* (a masked URL) is named after the queue. The
    sentence names up to :data:`KNOWN_QUEUES_SHOWN` known queues, as a typo's fix is
    usually among them. Raises nothing.
    """
    if known is None or stats.groups or stats.dead_letters or stats.scheduled or queue in known:
        return None
    place = f" on {where}" if where else ""
    head = (
        f"queue {queue!r} has never been used{place} (no groups, no dead letters, no "
        "scheduled messages, and the store lists no queue of that name; a queue drained to "
        "nothing looks the same)"
    )
    if not known:
        return head + "; no queue there holds anything yet"
    names = ", ".join(known[:KNOWN_QUEUES_SHOWN])
    more = f", ... ({len(known)} in all)" if len(known) > KNOWN_QUEUES_SHOWN else ""
    return f"{head}; the queues there: {names}{more}"


def never_used(transport: Transport, *, where: str = "") -> str | None:
    """Return a sentence when *transport*'s queue has never been used, else None.

    A typo in a queue name (``?queue=ordrs``) otherwise looks like an empty queue: every
    listing is empty and a worker waits forever. One ``stats()`` call, and ``queues()`` only
    when the queue looks empty; None as well when the transport cannot list its queues
    (no :class:`~pgque.core.SupportsQueues`). See :func:`never_used_text`. Raises what those
    calls raise (TransportClosed, ConnectionLost, PgqueError).
    """
    stats = transport.stats()
    if stats.groups or stats.dead_letters or stats.scheduled:
        return None
    if not isinstance(transport, SupportsQueues):
        return None
    return never_used_text(transport.queue, stats, transport.queues(), where=where)


async def never_used_async(transport: AsyncTransport, *, where: str = "") -> str | None:
    """The asyncio twin of :func:`never_used`."""
    stats = await transport.stats()
    if stats.groups or stats.dead_letters or stats.scheduled:
        return None
    if not isinstance(transport, AsyncSupportsQueues):
        return None
    return never_used_text(transport.queue, stats, await transport.queues(), where=where)
