"""What a publish_many pays in Python per message, kept small without changing what is stored:
the trace context is read once per batch, each distinct group id is checked once, and the
event JSON comes from orjson, byte for byte what the standard encoder wrote."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pgque.core import Event, InMemoryTransport, InvalidInput, tracing
from pgque.core.validation import check_items

pytestmark = pytest.mark.timeout(30)


def standard_json(event: Event) -> str:
    """The event's JSON as json.dumps wrote it before orjson."""
    return json.dumps(
        {
            "id": event.id,
            "kind": event.kind,
            "data": event.data,
            "headers": event.headers,
            "created_at": event.created_at.isoformat(),
        },
        ensure_ascii=False,
        allow_nan=False,
        separators=(",", ":"),
    )


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"n": 1},
        {"text": 'é ü 中 \u2028 \x7f \x00 \x1f "q" \\ \n\t', "emoji": "\U0001f600"},
        [1, -2, True, False, None, "s", {"a": [{"b": []}]}],
        {"big": 2**64, "bigger": -(2**100)},  # past orjson's 64 bits: the standard encoder
        {"x" * 300: "y" * 5_000},
        "just a string",
        0,
    ],
)
def test_to_json_writes_what_the_standard_encoder_wrote(data: Any) -> None:
    event = Event(kind="k", data=data, headers={"h": "v"})
    assert event.to_json() == standard_json(event)
    assert Event.from_json(event.to_json()) == event


@pytest.mark.parametrize("value", [0.1, 1.5, -0.0, 5e-324, 1.7976931348623157e308, 1e16, 1e-5])
def test_floats_round_trip_exactly(value: float) -> None:
    event = Event(kind="k", data={"f": value})
    assert json.loads(event.to_json())["data"]["f"] == value
    assert Event.from_json(event.to_json()) == event


def test_to_json_still_refuses_what_is_not_json() -> None:
    # The data is mutable inside the frozen event: what is changed after the event's own
    # checks is checked again when it is written.
    inner: list[Any] = []
    event = Event(kind="k", data={"a": inner})
    stored: Any = event.data
    stored["a"].append(float("nan"))
    with pytest.raises(InvalidInput, match="not JSON-serialisable"):
        event.to_json()
    keyed = Event(kind="k", data={"a": {}})
    stored = keyed.data
    stored["a"][1] = "x"
    with pytest.raises(InvalidInput, match="not a string"):
        keyed.to_json()
    tupled = Event(kind="k", data={"a": None})
    stored = tupled.data
    stored["a"] = (1, 2)
    with pytest.raises(InvalidInput, match="tuple is not a JSON value"):
        tupled.to_json()


def test_a_bad_group_id_is_refused_wherever_it_repeats() -> None:
    event = Event(kind="k")
    with pytest.raises(InvalidInput, match="must not be blank"):
        check_items([("g", event), ("g", event), (" ", event), ("g", event)])
    with pytest.raises(InvalidInput, match="must be a str"):
        check_items([("g", event), (b"g", event)])
    assert [g for g, _e, _t in check_items([("a", event), ("b", event), ("a", event)])] == [
        "a",
        "b",
        "a",
    ]


def test_publish_many_reads_the_trace_context_once(
    otel_spans: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = tracing._active()
    assert api is not None
    calls: list[int] = []
    inject = api.propagator.inject

    def counted(carrier: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(1)
        inject(carrier, *args, **kwargs)

    monkeypatch.setattr(api.propagator, "inject", counted)
    transport = InMemoryTransport()
    with otel_spans.tracer.start_as_current_span("request"):
        transport.publish_many([(f"g{i % 10}", Event(kind="k")) for i in range(100)])
    leases = transport.claim_many(100)
    assert len(leases) == 10
    parents = {lease.event.headers["traceparent"] for lease in leases}
    assert len(parents) == 1  # every message carries the publish span's context
    assert len(calls) == 1


class CountedEvent(Event):
    """An Event that counts how often it is written as JSON."""

    def to_json(self) -> str:
        written.append(self.id)
        return super().to_json()


written: list[str] = []


def test_an_event_given_many_times_in_a_batch_is_written_once() -> None:
    written.clear()
    fanned = CountedEvent(kind="k", data={"n": 1})
    other = CountedEvent(kind="k", data={"n": 2})
    items = [(f"g{i}", fanned) for i in range(5)] + [("h", other), ("g0", fanned)]
    checked = check_items(items)
    assert written == [fanned.id, other.id]
    assert [text for _g, _e, text in checked] == [fanned.to_json()] * 5 + [
        other.to_json(),
        fanned.to_json(),
    ]
    transport = InMemoryTransport()
    transport.publish_many(items)
    assert [lease.event.to_json() for lease in transport.claim_many(10)] == [
        fanned.to_json()
    ] * 5 + [other.to_json()]
