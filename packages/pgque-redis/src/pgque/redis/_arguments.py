"""What a script call sends beside its keys: the flags and "now" every script takes first, and
each operation's arguments, encoded as the scripts read them."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from pgque.core.errors import InvalidInput, PgqueError
from pgque.core.stored import error_json_head
from pgque.core.validation import CheckedSettlement

__all__ = [
    "script_flags",
    "now_arg",
    "new_nonce",
    "holder_arg",
    "settlement_args",
    "MAX_MESSAGE_ID",
    "score_after",
    "JOIN_BATCH",
    "GROUPS_SCAN_BUDGET",
    "millis",
]


def script_flags(known: bool, sharded: bool) -> str:
    """Return the flags argument of every script (``lua/lib/keys.lua``): ``k`` when the caller
    wrote to the queue before (its meta key must exist), ``s`` for sharded wake-ups (SPUBLISH)."""
    return ("k" if known else "") + ("s" if sharded else "")


def now_arg(now: float | None) -> str:
    """Return the script's "now" argument: the injected clock's time, or "" (server TIME).
    Raises PgqueError for a time that is not finite."""
    if now is None:
        return ""
    if not math.isfinite(now):
        raise PgqueError(f"the injected clock returned {now!r}")
    return repr(now)


def new_nonce() -> str:
    """Return a random prefix for the fencing tokens of one claim call (128 random bits)."""
    return os.urandom(16).hex()


def holder_arg(holders: Sequence[str | None]) -> str:
    """The holder argument of the claim scripts: one label for every lease ("" = none), or,
    when the labels differ, lease k's label as the k-th of NUL-separated labels (a holder
    never holds NUL)."""
    if not holders:
        return ""
    first = holders[0]
    if all(label == first for label in holders):
        return first or ""
    return "\0".join(label or "" for label in holders)


def settlement_args(item: CheckedSettlement) -> list[str | int]:
    """Return a settlement's 6 arguments after its outcome (settle_claim.lua; also its own
    script's after "now"): group id, token, message id, the delay (nack) or reason
    (dead_letter), the error's JSON up to its time (:func:`~pgque.core.stored.error_json_head`)
    and that time ("" for the script's "now": ``item.store_clock``). Raises InvalidInput for
    an own time that is not a finite number.
    """
    lease = item.lease
    head: list[str | int] = [lease.group_id, lease.token, lease.message_id]
    info = item.error
    if item.outcome in ("ack", "release"):
        return [*head, "", "", ""]
    extra = repr(item.delay) if item.outcome == "nack" else item.reason
    if info is None:
        return [*head, extra, "", ""]
    if not (item.store_clock or math.isfinite(info.at)):
        raise InvalidInput(f"an error's time must be a finite number, not {info.at!r}")
    at = "" if item.store_clock else repr(float(info.at))
    return [*head, extra, error_json_head(info), at]


#: Message and dead-letter ids are below this (a Redis score holds them exactly; a scheduled
#: message's key has 16 digits).
MAX_MESSAGE_ID = 2**53


def score_after(after: int | None, least: int) -> str:
    """Return a page's ``after`` argument (scheduled, dead_letters): "" for None, else *after*
    brought into the scores' range, from *least* to :data:`MAX_MESSAGE_ID`."""
    return "" if after is None else str(max(least, min(after, MAX_MESSAGE_ID)))


#: How many due scheduled messages one join_due script call moves at most (as one claim does).
JOIN_BATCH = 1000

#: How many group ids one call of the groups script examines at most. A page filtered by a
#: state the index does not hold (ready, leased, parked) is built by as many calls as it needs,
#: each going on after the last id the previous one examined, so Redis is never held for long.
GROUPS_SCAN_BUDGET = 500


def millis(seconds: float) -> int:
    """Return *seconds* in whole milliseconds, rounded up, at least 1 (a ``PX`` argument: the
    partition adapters' lock and dedup TTLs)."""
    return max(1, math.ceil(seconds * 1000))
