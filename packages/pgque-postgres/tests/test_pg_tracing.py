"""OpenTelemetry tracing on PostgreSQL: the trace context stored with the message, the worker's
CONSUMER span a child of the publish's PRODUCER span, with the outcome of each run."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.trace import SpanKind, StatusCode

from pgque.conformance.spans import Spans, traceparent_of
from pgque.core import Event, Reject, RetryPolicy, Worker
from pgque.postgres import PostgresTransport

pytestmark = pytest.mark.timeout(60)

Factory = Callable[..., PostgresTransport]


@pytest.fixture
def spans(otel_spans: Spans) -> Spans:
    """The plugin's recorded spans, under this module's name for them."""
    return otel_spans


def test_publish_stores_the_producer_spans_context(
    spans: Spans, transport_factory: Factory
) -> None:
    transport = transport_factory()
    with spans.tracer.start_as_current_span("request") as request:
        message_id = transport.publish("g1", Event(kind="k", headers={"x": "1"}))
        ids = transport.publish_many([("g2", Event(kind="k")), ("g3", Event(kind="k"))])
    single, batch = spans.finished(f"publish {transport.queue}")
    for producer in (single, batch):
        assert producer.kind is SpanKind.PRODUCER
        assert producer.parent is not None
        assert producer.parent.span_id == request.get_span_context().span_id
    assert dict(single.attributes or {})["messaging.message.id"] == str(message_id)
    assert dict(batch.attributes or {})["messaging.batch.message_count"] == len(ids) == 2
    leases = sorted(transport.claim_many(10), key=lambda x: x.message_id)
    assert [lease.event.headers for lease in leases] == [
        {"x": "1", "traceparent": traceparent_of(single)},
        {"traceparent": traceparent_of(batch)},
        {"traceparent": traceparent_of(batch)},
    ]


def test_a_transactional_publish_is_traced_too(
    spans: Spans, transport_factory: Factory, postgres_url: str
) -> None:
    transport = transport_factory()
    with (
        psycopg.connect(postgres_url) as conn,
        spans.tracer.start_as_current_span("request"),
    ):
        transport.publish("g", Event(kind="k"), connection=conn)
        conn.commit()
    producer = spans.one(f"publish {transport.queue}")
    lease = transport.claim()
    assert lease is not None
    assert lease.event.headers == {"traceparent": traceparent_of(producer)}


@pytest.mark.parametrize("outcome", ["acked", "retried", "dead_lettered"])
def test_the_workers_consumer_span_continues_the_trace(
    spans: Spans, transport_factory: Factory, outcome: str
) -> None:
    transport = transport_factory()
    queue = transport.queue
    with spans.tracer.start_as_current_span("request"):
        message_id = transport.publish("g1", Event(kind="k"))
    calls: list[int] = []

    def handler(event: Event) -> None:
        calls.append(1)
        with spans.tracer.start_as_current_span("handler work"):
            pass
        if outcome == "retried" and len(calls) == 1:
            raise ValueError("boom")
        if outcome == "dead_lettered":
            raise Reject("bad")

    worker = Worker(
        transport, handler, idle_backoff=(0.005, 0.05), retry=RetryPolicy(base=0.0, jitter=0.0)
    )
    worker.run(stop_when_idle=True, install_signal_handlers=False)

    producer = spans.one(f"publish {queue}")
    assert producer.context is not None
    consumers = spans.finished(f"process {queue}")
    assert len(consumers) == (2 if outcome == "retried" else 1)
    first = consumers[0]
    assert first.kind is SpanKind.CONSUMER
    assert first.context is not None
    assert first.context.trace_id == producer.context.trace_id
    assert first.parent is not None
    assert first.parent.span_id == producer.context.span_id
    attributes = dict(first.attributes or {})
    assert attributes["messaging.system"] == "pgque"
    assert attributes["messaging.destination.name"] == queue
    assert attributes["messaging.message.id"] == str(message_id)
    assert attributes["pgque.group"] == "g1"
    assert attributes["pgque.attempt"] == 1
    assert attributes["pgque.outcome"] == outcome
    expected = StatusCode.UNSET if outcome == "acked" else StatusCode.ERROR
    assert first.status.status_code is expected
    if outcome == "retried":
        assert dict(consumers[1].attributes or {})["pgque.attempt"] == 2
        assert dict(consumers[1].attributes or {})["pgque.outcome"] == "acked"
    inner = spans.finished("handler work")[0]
    assert inner.parent is not None
    assert inner.parent.span_id == first.context.span_id
