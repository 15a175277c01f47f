"""Event round trip: unicode, nested and scalar data, a mebibyte, id and time."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from pgque.conformance.suite_async._helpers import _claim
from pgque.core import (
    AsyncTransport,
    Event,
)

# -- Event round trip ----------------------------------------------------------------------


async def _round_trip(transport: AsyncTransport, event: Event, group: str = "g") -> Event:
    await transport.publish(group, event)
    lease = await _claim(transport)
    assert await transport.ack(lease)
    assert lease.group_id == group
    assert lease.event == event
    assert lease.event.to_json() == event.to_json()
    return lease.event


async def test_event_round_trip_unicode(atransport: AsyncTransport) -> None:
    text = "héllo wörld — 日本語 — العربية — 🦆🏳️‍🌈 — e\u0301 — \u2028 \t \\ \" '"
    event = Event(
        id="ünï-🆔",
        kind="kïnd ✓",
        data={"text": text, text: [text]},
        headers={"x-ünicode": text, "trace": "🦆"},
    )
    got = await _round_trip(atransport, event, group="grüppe-🦆")
    assert isinstance(got.data, dict)
    assert got.data["text"] == text


async def test_event_round_trip_nested_data(atransport: AsyncTransport) -> None:
    data: Any = {
        "null": None,
        "bools": [True, False],
        "ints": [0, -1, 2**53 - 1, -(2**53) + 1],
        "floats": [0.1, -2.5, 1e-7, 1.5e300],
        "empty": {"list": [], "obj": {}, "str": ""},
        "deep": {"a": [{"b": [{"c": [1, [2, [3, {"d": "e"}]]]}]}]},
    }
    await _round_trip(atransport, Event(kind="nested", data=data))


@pytest.mark.parametrize("data", [None, 0, 3.25, "just text", [1, "two", None], True])
async def test_event_round_trip_scalar_data(atransport: AsyncTransport, data: Any) -> None:
    await _round_trip(atransport, Event(kind="scalar", data=data))


async def test_event_round_trip_one_mebibyte(atransport: AsyncTransport) -> None:
    blob = ("0123456789abcdef" * 65536)[: 1 << 20]
    event = Event(kind="big", data={"blob": blob, "tail": "ü" * 1000})
    got = await _round_trip(atransport, event)
    assert isinstance(got.data, dict)
    assert got.data["blob"] == blob


async def test_event_round_trip_keeps_id_and_time(atransport: AsyncTransport) -> None:
    local = timezone(timedelta(hours=5, minutes=30))
    created = datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=local)
    event = Event(id="fixed-id", kind="k", created_at=created)
    got = await _round_trip(atransport, event)
    assert got.id == "fixed-id"
    assert got.created_at == created
    assert got.created_at.utcoffset() == timedelta(0)
    assert got.created_at.microsecond == 123456


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
