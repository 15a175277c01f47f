"""OpenTelemetry tracing on Redis: every publish (blocking and asyncio) stores the trace context
of its PRODUCER span, and the worker's CONSUMER span is that span's child."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

pytest.importorskip("opentelemetry.sdk")

from pgque.conformance.spans import Spans, traceparent_of
from pgque.core import Event, Worker
from pgque.redis import AsyncRedisTransport, RedisTransport

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def spans(otel_spans: Spans) -> Spans:
    """The plugin's recorded spans, under this module's name for them."""
    return otel_spans


def test_every_publish_stores_its_span_and_the_worker_continues_it(
    spans: Spans,
    transport_factory: Callable[..., RedisTransport],
    redis_url: str,
) -> None:
    transport = transport_factory()
    queue = transport.queue

    async def publish_async() -> None:
        other = AsyncRedisTransport(redis_url, queue=queue)
        try:
            with spans.tracer.start_as_current_span("request"):
                await other.publish("g3", Event(kind="k"))
                await other.publish_many([("g4", Event(kind="k"))])
        finally:
            await other.close()

    with spans.tracer.start_as_current_span("request"):
        transport.publish("g1", Event(kind="k"))
        transport.publish_many([("g2", Event(kind="k"))])
    asyncio.run(publish_async())
    producers = spans.finished(f"publish {queue}")
    assert len(producers) == 4
    seen: dict[str, str] = {}
    Worker(
        transport,
        lambda event, lease: seen.__setitem__(lease.group_id, event.headers["traceparent"]),
        idle_backoff=(0.005, 0.05),
    ).run(stop_when_idle=True, install_signal_handlers=False)
    assert seen == {f"g{i + 1}": traceparent_of(p) for i, p in enumerate(producers)}
    consumers = {
        dict(c.attributes or {})["pgque.group"]: c for c in spans.finished(f"process {queue}")
    }
    for i, producer in enumerate(producers):
        consumer = consumers[f"g{i + 1}"]
        assert consumer.parent is not None
        assert producer.context is not None
        assert consumer.parent.span_id == producer.context.span_id
        assert dict(consumer.attributes or {})["pgque.outcome"] == "acked"


def test_publish_tick_makes_a_producer_span_whose_context_its_event_carries(
    spans: Spans,
    transport_factory: Callable[..., RedisTransport],
    redis_url: str,
) -> None:
    transport = transport_factory()
    queue = transport.queue

    async def tick_async() -> int | None:
        other = AsyncRedisTransport(redis_url, queue=queue)
        try:
            with spans.tracer.start_as_current_span("scheduler"):
                return await other.publish_tick("e", 2.0, "g", Event(kind="tick"))
        finally:
            await other.close()

    with spans.tracer.start_as_current_span("scheduler"):
        first = transport.publish_tick("e", 1.0, "g", Event(kind="tick"))
        assert transport.publish_tick("e", 1.0, "g", Event(kind="tick")) is None  # spanned too
    second = asyncio.run(tick_async())
    producers = spans.finished(f"publish {queue}")
    assert len(producers) == 3
    for producer in producers:
        attributes = dict(producer.attributes or {})
        assert attributes["messaging.operation.name"] == "publish_tick"
        assert attributes["messaging.destination.name"] == queue
    ids = [dict(p.attributes or {}).get("messaging.message.id") for p in producers]
    assert ids == [str(first), None, str(second)]
    carried = []
    while (lease := transport.claim()) is not None:
        carried.append(lease.event.headers["traceparent"])
        assert transport.ack(lease)
    assert carried == [traceparent_of(producers[0]), traceparent_of(producers[2])]
