"""OpenTelemetry tracing on the asyncio PostgreSQL transport and the AsyncWorker: the trace
context stored with the message, the CONSUMER span a child of the PRODUCER span, current in
an ``async def`` handler and in a plain one (run in a thread)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.trace import SpanKind

from pgque.conformance.spans import Spans
from pgque.core import AsyncWorker, Event
from pgque.postgres_async import AsyncPostgresTransport

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(60)]

AsyncFactory = Callable[..., Awaitable[AsyncPostgresTransport]]


@pytest.fixture
def spans(otel_spans: Spans) -> Spans:
    """The plugin's recorded spans, under this module's name for them."""
    return otel_spans


@pytest.mark.parametrize("handler_kind", ["async def", "plain"])
async def test_the_consumer_span_continues_the_publish_trace(
    spans: Spans, async_transport_factory: AsyncFactory, handler_kind: str
) -> None:
    transport = await async_transport_factory()
    queue = transport.queue
    with spans.tracer.start_as_current_span("request"):
        message_id = await transport.publish("g1", Event(kind="k"))
    producer = spans.one(f"publish {queue}")
    assert producer.kind is SpanKind.PRODUCER
    assert producer.context is not None
    assert dict(producer.attributes or {})["messaging.message.id"] == str(message_id)

    seen: list[dict[str, str]] = []

    def work(event: Event) -> None:
        seen.append(dict(event.headers))
        with spans.tracer.start_as_current_span("handler work"):
            pass

    async def async_handler(event: Event) -> None:
        work(event)

    handler: Any = async_handler if handler_kind == "async def" else work
    worker = AsyncWorker(transport, handler, idle_backoff=(0.005, 0.05))
    await worker.run(stop_when_idle=True, install_signal_handlers=False)

    ctx = producer.context
    assert seen == [
        {"traceparent": f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"}
    ]
    consumer = spans.one(f"process {queue}")
    assert consumer.kind is SpanKind.CONSUMER
    assert consumer.context is not None
    assert consumer.context.trace_id == ctx.trace_id
    assert consumer.parent is not None
    assert consumer.parent.span_id == ctx.span_id
    attributes = dict(consumer.attributes or {})
    assert attributes["messaging.message.id"] == str(message_id)
    assert attributes["pgque.outcome"] == "acked"
    inner = spans.one("handler work")
    assert inner.parent is not None
    assert inner.parent.span_id == consumer.context.span_id
