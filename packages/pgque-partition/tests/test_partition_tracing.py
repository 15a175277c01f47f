"""OpenTelemetry tracing of a keyed publisher's sends, on every backend: one PRODUCER span per
send (the transport's own publish inside it makes none), its context in the stored headers,
plain and deduplicated sends alike."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _partition_support import Make

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from pgque.partition import KEY_HEADER, KeyedPublisher

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def provider(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """An SDK provider, recording in memory, that pgque finds as the global one (this test)."""
    exporter = InMemorySpanExporter()
    sdk = TracerProvider()
    sdk.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: sdk)
    yield sdk, exporter
    sdk.shutdown()


def traceparent_of(span: ReadableSpan) -> str:
    ctx = span.context
    assert ctx is not None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def test_each_send_is_one_producer_span_whose_context_is_stored(
    transport_factory: Make, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    sdk, exporter = provider
    transport = transport_factory()
    publisher = KeyedPublisher(transport)
    with sdk.get_tracer("app").start_as_current_span("request"):
        plain_id, _ = publisher.send("k", {"n": 1}, partition_key="a")
        dedup_id, first = publisher.send(
            "k", {"n": 2}, partition_key="b", dedup_key="d", dedup_ttl=60
        )
        again_id, repeat = publisher.send(
            "k", {"n": 3}, partition_key="b", dedup_key="d", dedup_ttl=60
        )
    assert (first, repeat, again_id) == (False, True, dedup_id)
    sends = [s for s in exporter.get_finished_spans() if s.name == f"publish {transport.queue}"]
    assert len(sends) == 3  # no nested span for the transport's publish
    for span, message_id, deduped in zip(
        sends, (plain_id, dedup_id, dedup_id), (False, False, True), strict=True
    ):
        attributes = dict(span.attributes or {})
        assert span.kind is SpanKind.PRODUCER
        assert attributes["messaging.operation.name"] == "send"
        assert attributes["messaging.message.id"] == str(message_id)
        assert attributes["pgque.deduped"] is deduped
    stored = {}
    while (lease := transport.claim()) is not None:
        stored[lease.message_id] = lease.event.headers
        transport.ack(lease)
    assert stored == {
        plain_id: {KEY_HEADER: "a", "traceparent": traceparent_of(sends[0])},
        dedup_id: {KEY_HEADER: "b", "traceparent": traceparent_of(sends[1])},
    }
