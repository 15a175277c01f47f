"""The front door's checks, written once for both clients: the checks of pgque.core.validation
leave an event as given, and the front door adds the trace context to what it publishes."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk")

from pgque.conformance.spans import Spans
from pgque.core import AsyncClient, Client, Event, InMemoryTransport, InvalidInput
from pgque.core.client._checks import ClientChecks, traced_event
from pgque.core.validation import check_event, check_items, checked_event

pytestmark = pytest.mark.timeout(30)

#: What does no I/O: written once, in ClientChecks, not in either generated twin.
NO_IO = (
    "capabilities",
    "max_attempts",
    "on_exhausted",
    "_now",
    "_lease",
    "_settlements",
    "_fairness_key",
    "_publication",
    "_checked_one",
    "_checked_batch",
)


def stored_headers(transport: InMemoryTransport) -> list[dict[str, str]]:
    """The headers of every message of *transport*'s queue, as stored (claimed and released)."""
    leases = transport.claim_many(100)
    for lease in leases:
        transport.release(lease)
    return [lease.event.headers for lease in leases]


@pytest.mark.parametrize("client", [Client, AsyncClient])
def test_both_clients_inherit_the_checks(client: type[object]) -> None:
    assert issubclass(client, ClientChecks)
    for name in NO_IO:
        assert name in vars(ClientChecks), name
        assert name not in vars(client), name


def test_the_checks_leave_the_event_as_given(otel_spans: Spans) -> None:
    event = Event(kind="k")
    with otel_spans.tracer.start_as_current_span("request"):
        assert checked_event(event) == (event, event.to_json())
        assert check_event(event) == event.to_json()
        assert check_items([("g", event)]) == [("g", event, event.to_json())]
        traced, text = traced_event(event, 10_000)
    assert "traceparent" in traced.headers
    assert text == traced.to_json()


def test_traced_event_refuses_what_checked_event_refuses(otel_spans: Spans) -> None:
    with otel_spans.tracer.start_as_current_span("request"):
        for bad in (None, "k", {"kind": "k"}):
            with pytest.raises(InvalidInput, match=r"must be a pgque\.core\.Event"):
                traced_event(bad, 10_000)
        with pytest.raises(InvalidInput, match="max_event_bytes"):
            traced_event(Event(kind="k", data="x" * 100), 50)


def test_publish_many_keeps_the_size_limit_with_the_trace_context(otel_spans: Spans) -> None:
    limit = 400
    transport = InMemoryTransport(max_event_bytes=limit)
    base = Event(kind="k", data="")
    room = limit - len(base.to_json().encode())
    fits_bare = base.model_copy(update={"data": "x" * (room - 10)})  # too big with traceparent
    with otel_spans.tracer.start_as_current_span("request"):
        transport.publish_many([("g1", fits_bare), ("g2", Event(kind="k"))])
    headers = stored_headers(transport)
    assert headers[0] == {}  # stored without the context rather than refused
    assert "traceparent" in headers[1]
