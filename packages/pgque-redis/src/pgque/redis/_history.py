"""Job history on Redis, the pure part: the setting's script arguments, record ids and stream
entry ids, and the history script's reply (``lua/lib/history.lua``, ``lua/history.lua``).

A queue's records are the entries of one stream, ``<key prefix>hlog``, appended by the script
that settles each message. A record's id is its entry id ``<ms>-<seq>`` as
``ms * 1024 + seq``: entry ids grow, so record ids do (the script gives a record whose seq
would reach 1024 the next millisecond's first id), and they stay below 2**53 until the year
2248, so a JSON reader that holds numbers as doubles (JavaScript) keeps them exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pgque.core.history import HISTORY_OFF, HistoryQuery, HistoryRetention, HistorySetting
from pgque.core.models import HistoryRecord
from pgque.core.stored import history_record, readable
from pgque.core.stored import reply_text as text

__all__ = [
    "HISTORY_SCAN_BUDGET",
    "SEQ_BITS",
    "decode_history",
    "entry_id",
    "first_start",
    "history_args",
    "record_id",
    "setting_args",
]

#: How many stream entries one call of the history script examines at most.
HISTORY_SCAN_BUDGET = 1000

#: The bits of a record id that hold its entry id's sequence number.
SEQ_BITS = 10
_SEQ_MASK = (1 << SEQ_BITS) - 1


def record_id(entry: str | bytes) -> int:
    """Return the record id of stream entry id *entry* (``"<ms>-<seq>"``)."""
    ms, _, seq = text(entry).partition("-")
    return (int(ms) << SEQ_BITS) | int(seq)


def entry_id(record: int) -> str:
    """Return the stream entry id of record id *record* (the inverse of :func:`record_id`)."""
    return f"{record >> SEQ_BITS}-{record & _SEQ_MASK}"


def setting_args(setting: HistorySetting) -> tuple[str, ...]:
    """Return the set_history script's arguments after "now" for *setting*."""
    if setting == HISTORY_OFF:
        return (HISTORY_OFF,)
    assert isinstance(setting, HistoryRetention)
    keep = "-" if setting.keep_s is None else repr(float(setting.keep_s))
    rows = "-" if setting.max_rows is None else str(setting.max_rows)
    return keep, rows


def history_args(query: HistoryQuery, start: str, limit: int) -> tuple[str | int, ...]:
    """Return the history script's arguments after "now": read from *start* (``"+"``, or
    ``"("`` and an entry id), up to *limit* records, and *query*'s filters."""
    return (
        start,
        limit,
        HISTORY_SCAN_BUDGET,
        query.group_id or "",
        query.kind or "",
        "" if query.since is None else repr(query.since),
        query.outcome or "",
        "" if query.message_id is None else str(query.message_id),
    )


def first_start(query: HistoryQuery) -> str:
    """Where the first history call reads from: the newest record, or before *query.after*."""
    return "+" if query.after is None else "(" + entry_id(query.after)


def _optional(value: object) -> str | None:
    shown = readable(value)
    return shown or None


def _optional_float(value: object) -> float | None:
    shown = text(value)
    return float(shown) if shown else None


def decode_history(reply: Sequence[Any]) -> tuple[str | None, list[HistoryRecord]]:
    """Turn one history script reply into (where the next call reads from, or None when the
    stream has nothing older to examine; the records)."""
    cursor = text(reply[0])
    records: list[HistoryRecord] = []
    for i in range(1, len(reply), 13):
        row = reply[i : i + 13]
        records.append(
            history_record(
                (
                    record_id(row[0]),
                    int(text(row[1])),
                    readable(row[2]),
                    readable(row[3]),
                    _optional(row[4]),
                    text(row[5]),
                    int(text(row[6])),
                    _optional_float(row[7]),
                    _optional_float(row[8]),
                    float(text(row[9])),
                    _optional(row[10]),
                    _optional(row[11]),
                    _optional(row[12]),
                )
            )
        )
    return ("(" + cursor if cursor else None), records
