"""Job history, the pure part: the ``history`` option, a query's checks and its filter.

No I/O. A transport with ``Capabilities.history`` records what happened to each message of a
queue whose history is on (docs/history.md): every settled delivery, every head dead-lettered
by ``max_attempts``, every redrive. The option ``history`` turns it on with a retention (how
long records are kept, how many at most) or off; the store keeps the setting, so every worker
of the queue records alike. :class:`HistoryQuery` is what ``history()`` asks for, checked.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from pgque.core.errors import InvalidInput
from pgque.core.models import HISTORY_OUTCOMES, HistoryOutcome, HistoryRecord
from pgque.core.validation import check_text_id

__all__ = [
    "HISTORY_OFF",
    "HistoryQuery",
    "HistoryRetention",
    "HistorySetting",
    "MAX_HISTORY_KEEP_S",
    "MAX_HISTORY_PAGE",
    "MAX_HISTORY_ROWS",
    "check_history_option",
    "check_history_query",
    "history_option_text",
]

#: The longest retention: a year and a day.
MAX_HISTORY_KEEP_S = 366 * 86_400.0
#: The largest row cap.
MAX_HISTORY_ROWS = 1_000_000_000
#: The largest page of ``history()``.
MAX_HISTORY_PAGE = 1000
#: The option's value that turns a queue's history off.
HISTORY_OFF: Literal["off"] = "off"

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_ROWS = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class HistoryRetention:
    """How much history a queue keeps: records younger than *keep_s* seconds (None: any age),
    at most *max_rows* of them (None: no cap; the oldest go first). At least one is set.

    The store drops what falls out in bulk (PostgreSQL: whole partitions), so a record may
    outlive its retention by up to one bucket; ``history()`` never returns one that did.
    """

    keep_s: float | None = None
    max_rows: int | None = None

    def __post_init__(self) -> None:
        if self.keep_s is None and self.max_rows is None:
            raise InvalidInput("a history retention needs a duration, a row cap or both")
        if self.keep_s is not None and (
            isinstance(self.keep_s, bool)
            or not isinstance(self.keep_s, int | float)
            or not math.isfinite(self.keep_s)
            or not 1.0 <= self.keep_s <= MAX_HISTORY_KEEP_S
        ):
            raise InvalidInput(
                f"history keeps records from 1 s to {MAX_HISTORY_KEEP_S:.0f} s, not {self.keep_s!r}"
            )
        if self.max_rows is not None and (
            isinstance(self.max_rows, bool)
            or not isinstance(self.max_rows, int)
            or not 1 <= self.max_rows <= MAX_HISTORY_ROWS
        ):
            raise InvalidInput(
                f"history's row cap must be an int from 1 to {MAX_HISTORY_ROWS}, "
                f"not {self.max_rows!r}"
            )

    def oldest_kept(self, now: float) -> float | None:
        """The earliest ``finished_at`` still kept at *now*, or None (no age limit)."""
        return None if self.keep_s is None else now - self.keep_s


#: The ``history`` option, checked: a retention (on) or ``"off"``.
HistorySetting = HistoryRetention | Literal["off"]


def check_history_option(value: object) -> HistorySetting | None:
    """Check the transport option ``history``; None when it is not given.

    Accepted: a :class:`HistoryRetention`; a :class:`~datetime.timedelta`; ``"off"``; or text
    holding a duration (``90s``, ``30m``, ``12h``, ``7d``), a row cap (``1000000``) or both
    separated by a comma (``7d,1000000``), as in a URL's ``?history=7d``. Raises InvalidInput
    for anything else.
    """
    if value is None:
        return None
    if isinstance(value, HistoryRetention):
        return value
    if isinstance(value, timedelta):
        return HistoryRetention(keep_s=value.total_seconds())
    if not isinstance(value, str):
        raise InvalidInput(
            "history must be 'off', a duration such as '7d', a row cap such as '1000000', "
            f"both ('7d,1000000'), a timedelta or a HistoryRetention, not {value!r}"
        )
    text = value.strip().lower()
    if text == HISTORY_OFF:
        return HISTORY_OFF
    keep: float | None = None
    rows: int | None = None
    parts = [part.strip() for part in text.split(",")]
    for part in parts:
        duration = _DURATION.fullmatch(part)
        if duration is not None and keep is None:
            keep = float(duration.group(1)) * _UNITS[duration.group(2)]
        elif _ROWS.fullmatch(part) is not None and rows is None:
            rows = int(part)
        else:
            raise InvalidInput(
                f"history={value!r}: expected 'off', a duration (90s, 30m, 12h, 7d), a row cap "
                "(1000000) or both ('7d,1000000')"
            )
    return HistoryRetention(keep_s=keep, max_rows=rows)


def history_option_text(setting: HistorySetting) -> str:
    """The option's text for *setting* (``"7d,1000000"``, ``"off"``): what a URL carries."""
    if setting == HISTORY_OFF:
        return HISTORY_OFF
    assert isinstance(setting, HistoryRetention)
    parts: list[str] = []
    if setting.keep_s is not None:
        parts.append(_duration_text(setting.keep_s))
    if setting.max_rows is not None:
        parts.append(str(setting.max_rows))
    return ",".join(parts)


def _duration_text(seconds: float) -> str:
    for unit in ("d", "h", "m"):
        count = seconds / _UNITS[unit]
        if count >= 1 and count == int(count):
            return f"{int(count)}{unit}"
    return f"{seconds:g}s"


@dataclass(frozen=True, slots=True)
class HistoryQuery:
    """What ``history()`` asks for, checked: records newest first (largest id first), after
    the record id *after* (exclusive; the last id of the previous page), at most *limit*,
    each matching every filter given."""

    group_id: str | None = None
    kind: str | None = None
    since: float | None = None
    outcome: HistoryOutcome | None = None
    message_id: int | None = None
    limit: int = 100
    after: int | None = None

    def matches(self, record: HistoryRecord) -> bool:
        """Whether *record* is one this query asks for (ignoring the page bounds)."""
        return (
            (self.group_id is None or record.group_id == self.group_id)
            and (self.kind is None or record.kind == self.kind)
            and (self.since is None or record.finished_at >= self.since)
            and (self.outcome is None or record.outcome == self.outcome)
            and (self.message_id is None or record.message_id == self.message_id)
            and (self.after is None or record.id < self.after)
        )


def check_history_query(
    *,
    group: object = None,
    kind: object = None,
    since: object = None,
    outcome: object = None,
    message_id: object = None,
    limit: object = 100,
    after: object = None,
) -> HistoryQuery:
    """Check the arguments of ``history()``; raise InvalidInput naming the wrong one.

    *since* is epoch seconds or a timezone-aware datetime; *outcome* one of
    :data:`~pgque.core.models.HISTORY_OUTCOMES`; *limit* 1 to 1,000; *after* a record id.
    """
    group_id = _optional_text(group, "group", 512)
    checked_kind = _optional_text(kind, "kind", 256)
    if outcome is not None and outcome not in HISTORY_OUTCOMES:
        raise InvalidInput(
            f"outcome must be one of {', '.join(HISTORY_OUTCOMES)} or None, not {outcome!r}"
        )
    return HistoryQuery(
        group_id=group_id,
        kind=checked_kind,
        since=_since(since),
        outcome=outcome,
        message_id=_optional_id(message_id, "message_id"),
        limit=_limit(limit),
        after=_optional_id(after, "after"),
    )


def _optional_text(value: object, name: str, max_bytes: int) -> str | None:
    return None if value is None else check_text_id(value, name, max_bytes)


def _since(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidInput("since must be a timezone-aware datetime (or epoch seconds)")
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInput(f"since must be epoch seconds or an aware datetime, not {value!r}")
    return float(value)


def _optional_id(value: object, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**63:
        raise InvalidInput(f"{name} must be None or a positive int, not {value!r}")
    return value


def _limit(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_HISTORY_PAGE:
        raise InvalidInput(f"limit must be an int from 1 to {MAX_HISTORY_PAGE}, not {value!r}")
    return value
