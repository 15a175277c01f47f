"""Event validation, JSON round trips and the other contract values."""

from __future__ import annotations

import json
import math
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from pgque.core import Capabilities, DeadLetter, Event, InvalidInput, Lease, QueueStats
from pgque.core.models import random_ids


def test_event_defaults() -> None:
    before = datetime.now(timezone.utc)
    event = Event(kind="created")
    assert len(event.id) == 32
    int(event.id, 16)
    assert event.data == {}
    assert event.headers == {}
    assert event.created_at.tzinfo is not None
    assert event.created_at.utcoffset() == timedelta(0)
    assert before <= event.created_at <= datetime.now(timezone.utc)


def test_event_ids_are_unique() -> None:
    assert len({Event(kind="k").id for _ in range(100)}) == 100


def test_random_ids_are_version_4_uuids_as_uuid4_hex_writes_them() -> None:
    ids = [*random_ids(2_000), Event(kind="k").id]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert (parsed.hex, parsed.version, parsed.variant) == (text, 4, uuid.RFC_4122)
    assert random_ids(0) == []


def test_created_at_is_normalised_to_utc() -> None:
    local = timezone(timedelta(hours=-7))
    event = Event(kind="k", created_at=datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=local))
    assert event.created_at == datetime(2025, 1, 2, 10, 4, 5, 6, tzinfo=timezone.utc)
    assert event.created_at.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"kind": ""},
        {"kind": "k" * 257},
        {"kind": "k", "id": ""},
        {"kind": "k", "unknown": 1},
        {"kind": "k", "headers": {"a": 1}},
        {"kind": "k", "headers": ["a"]},
        {"kind": "k", "created_at": datetime(2025, 1, 1)},
        {"kind": "k", "created_at": "not a date"},
        {"kind": "k", "data": math.nan},
        {"kind": "k", "data": {"x": [math.inf]}},
        {"kind": "k", "data": {"x": object()}},
        {"kind": "k", "data": {1, 2}},
        {"kind": "k", "data": b"bytes"},
    ],
)
def test_invalid_event_raises_invalid_input(fields: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput) as info:
        Event(**fields)
    assert isinstance(info.value, ValueError)
    assert "invalid event" in str(info.value)


def test_event_is_frozen() -> None:
    event = Event(kind="k")
    with pytest.raises(ValidationError):
        event.kind = "other"


def test_to_json_is_compact_and_exact() -> None:
    created = datetime(2025, 6, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
    event = Event(
        id="e1", kind="k", data={"ü": [1, 2.5, None]}, headers={"h": "v"}, created_at=created
    )
    text = event.to_json()
    assert text == (
        '{"id":"e1","kind":"k","data":{"ü":[1,2.5,null]},"headers":{"h":"v"},'
        '"created_at":"2025-06-01T12:00:00.123456+00:00"}'
    )
    assert json.loads(text)["data"] == {"ü": [1, 2.5, None]}


@pytest.mark.parametrize(
    "data",
    [
        None,
        0,
        -(2**63),
        2**70,
        0.1,
        "text with \x00 and \u2028",
        [],
        {"nested": {"deep": [[[{"x": "🦆"}]]]}},
        {"x" * 1000: "y" * 100_000},
    ],
)
def test_json_round_trip(data: Any) -> None:
    event = Event(kind="k", data=data, headers={"trace-id": "abc", "ü": "ö"})
    text = event.to_json()
    back = Event.from_json(text)
    assert back == event
    assert back.to_json() == text
    assert Event.from_json(text.encode("utf-8")) == event


def test_to_json_refuses_unvalidated_data() -> None:
    sneaky = Event.model_construct(kind="k", data={"x": math.nan})
    with pytest.raises(InvalidInput):
        sneaky.to_json()
    with pytest.raises(InvalidInput):
        Event.model_construct(kind="k", data={"x": object()}).to_json()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "not json",
        "[]",
        '"a string"',
        "null",
        "{}",
        '{"kind": ""}',
        '{"kind": "k", "extra": 1}',
        '{"kind": "k", "created_at": "2025-01-01T00:00:00"}',
        b"\xff\xfe",
    ],
)
def test_from_json_errors(text: str | bytes) -> None:
    with pytest.raises(InvalidInput):
        Event.from_json(text)


def test_lease_is_frozen_and_defaults() -> None:
    lease = Lease(
        group_id="g",
        message_id=1,
        event=Event(kind="k"),
        token="t",
        priority=0,
        attempt=1,
        expires_at=1.0,
    )
    assert (lease.queue, lease.origin) == ("default", "")
    with pytest.raises(ValidationError):
        lease.token = "other"
    moved = lease.model_copy(update={"expires_at": 2.0})
    assert (moved.expires_at, lease.expires_at) == (2.0, 1.0)


def test_dead_letter_and_stats_values() -> None:
    dead = DeadLetter(
        id=1,
        group_id="g",
        message_id=2,
        event=Event(kind="k"),
        priority=0,
        attempts=3,
        reason="r",
        failed_at=1.0,
    )
    assert dead.attempts == 3
    stats = QueueStats(
        groups=1,
        messages=2,
        in_flight=0,
        parked=0,
        blocked=0,
        dead_letters=1,
        oldest_age_s=None,
    )
    assert stats.next_resume_at is None


def test_capabilities_defaults() -> None:
    caps = Capabilities()
    assert (caps.injected_clock, caps.priorities, caps.dead_letters) == (True, True, True)
    assert (caps.transactional_publish, caps.durable) == (False, False)
    assert Capabilities(durable=True) != caps
