"""What a script call sends beside its keys: the flags and "now" every script takes first, and
each operation's arguments, encoded as the scripts read them."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence

from pgque.core.errors import (
    InvalidInput,
    PgqueError,
)
from pgque.core.models import (
    ErrorInfo,
    Settlement,
)
from pgque.core.validation import (
    CheckedSettlement,
    check_error,
)

__all__ = [
    "script_flags",
    "now_arg",
    "new_nonce",
    "holder_arg",
    "error_args",
    "record_args",
    "settlement_args",
    "MAX_MESSAGE_ID",
    "scheduled_after",
    "dead_letter_after",
    "JOIN_BATCH",
    "GROUPS_SCAN_BUDGET",
]


def script_flags(known: bool, sharded: bool) -> str:
    """Return the flags argument of every script (``lua/lib/keys.lua``): ``k`` when the caller
    wrote to the queue before (its meta key must exist), ``s`` for sharded wake-ups (SPUBLISH)."""
    return ("k" if known else "") + ("s" if sharded else "")


def now_arg(clock: Callable[[], float] | None) -> str:
    """Return the script's "now" argument: the injected clock's time, or "" (server TIME)."""
    if clock is None:
        return ""
    now = float(clock())
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


#: What a record's JSON ends with when its time is 0.0; the script puts the time in its place.
_AT_TAIL = "0.0}"


def error_args(error: object) -> tuple[str, str]:
    """Return the script arguments for *error* (``error=`` of nack and dead_letter).

    The first is the record's JSON (:meth:`ErrorInfo.to_json`) up to its time, the second the
    time: an ErrorInfo's own, or "" for the script's "now" (the server's clock, or the
    injected one), so a record made from an exception or a string is timed like every other
    time of the queue. ("", "") for None. Raises InvalidInput for anything else, or an
    ErrorInfo whose time is not a finite number.
    """
    return record_args(check_error(error, 0.0), isinstance(error, ErrorInfo))


def record_args(info: ErrorInfo | None, own_time: bool) -> tuple[str, str]:
    """Return the script arguments for the checked record *info* (see :func:`error_args`).

    *own_time* says the caller gave an ErrorInfo whole, so its ``at`` is kept; otherwise the
    script times the record. Raises InvalidInput for an own time that is not finite.
    """
    if info is None:
        return "", ""
    stamp = ""
    if own_time:
        if not math.isfinite(info.at):
            raise InvalidInput(f"an error's time must be a finite number, not {info.at!r}")
        stamp = repr(float(info.at))
    whole = info.model_copy(update={"at": 0.0}).to_json()
    if not whole.endswith('"at":' + _AT_TAIL):  # pragma: no cover - ErrorInfo.to_json changed
        raise PgqueError("ErrorInfo.to_json no longer ends with its time")
    return whole[: -len(_AT_TAIL)], stamp


def settlement_args(
    checked: Sequence[CheckedSettlement], given: Sequence[Settlement]
) -> list[str | int]:
    """Return the settle_claim script's 7 arguments per settlement (see settle_claim.lua).

    *checked* is ``check_settlements(given, ...)``, captured at time 0: an error made from an
    exception or a str is timed by the script, an ErrorInfo given whole keeps its own time
    (as ``nack`` and ``dead_letter`` do). Raises InvalidInput for an ErrorInfo whose time is
    not a finite number.
    """
    args: list[str | int] = []
    for item, original in zip(checked, given, strict=True):
        lease = item.lease
        outcome = item.outcome
        if outcome == "ack" or outcome == "release":
            args += [outcome, lease.group_id, lease.token, lease.message_id, "", "", ""]
            continue
        record, at = record_args(item.error, isinstance(original.error, ErrorInfo))
        extra = repr(item.delay) if outcome == "nack" else item.reason
        args += [outcome, lease.group_id, lease.token, lease.message_id, extra, record, at]
    return args


#: Message ids are below this (a Redis score holds them exactly; a scheduled message's key has
#: 16 digits).
MAX_MESSAGE_ID = 2**53


def scheduled_after(after: int | None) -> str:
    """Return the scheduled script's ``after`` argument ("" for None), within score range."""
    if after is None:
        return ""
    return str(max(0, min(after, MAX_MESSAGE_ID)))


#: Dead-letter ids are below this (they are integers a Redis score holds exactly).
_MAX_SCORE_INT = 2**53


def dead_letter_after(after: int | None) -> str:
    """Return the dead_letters script's ``after`` argument ("" for None), within score range."""
    if after is None:
        return ""
    return str(max(-_MAX_SCORE_INT, min(after, _MAX_SCORE_INT)))


#: How many due scheduled messages one join_due script call moves at most (as one claim does).
JOIN_BATCH = 1000

#: How many group ids one call of the groups script examines at most. A page filtered by a
#: state the index does not hold (ready, leased, parked) is built by as many calls as it needs,
#: each going on after the last id the previous one examined, so Redis is never held for long.
GROUPS_SCAN_BUDGET = 500
