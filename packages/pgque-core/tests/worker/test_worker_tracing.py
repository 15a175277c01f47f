"""OpenTelemetry tracing on the memory transport: trace context in the headers, a PRODUCER span
per publish, a CONSUMER span per handler run (pgque.core.tracing)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from pgque.conformance.spans import Spans, traceparent_of
from pgque.core import (
    AsyncInMemoryTransport,
    AsyncWorker,
    Event,
    InMemoryTransport,
    InvalidInput,
    MemoryStore,
    Reject,
    RetryPolicy,
    Worker,
)
from pgque.core.tracing import WorkerTracing

pytestmark = pytest.mark.timeout(30)

FAST: dict[str, Any] = {"idle_backoff": (0.005, 0.05), "retry": RetryPolicy(base=0.0, jitter=0.0)}


@pytest.fixture
def spans(otel_spans: Spans) -> Spans:
    """The plugin's recorded spans, under this module's name for them."""
    return otel_spans


def stored_headers(transport: InMemoryTransport) -> list[dict[str, str]]:
    """The headers of every message of *transport*'s queue, as stored (claimed and released)."""
    leases = transport.claim_many(100)
    for lease in leases:
        transport.release(lease)
    return [lease.event.headers for lease in leases]


# ----------------------------------------------------------------------------- publish


def test_publish_in_a_span_injects_the_producer_span_context(spans: Spans) -> None:
    transport = InMemoryTransport(queue="orders")
    with spans.tracer.start_as_current_span("request") as request:
        message_id = transport.publish("g1", Event(kind="k", headers={"x": "1"}))
    producer = spans.one("publish orders")
    assert producer.kind is SpanKind.PRODUCER
    assert producer.parent is not None
    assert producer.parent.span_id == request.get_span_context().span_id
    assert dict(producer.attributes or {}) == {
        "messaging.system": "pgque",
        "messaging.destination.name": "orders",
        "messaging.operation.type": "send",
        "messaging.operation.name": "publish",
        "messaging.message.id": str(message_id),
        "pgque.group": "g1",
    }
    [headers] = stored_headers(transport)
    assert headers == {"x": "1", "traceparent": traceparent_of(producer)}


def test_publish_many_async_makes_one_span_and_tags_every_event(spans: Spans) -> None:
    async def main() -> list[int]:
        transport = AsyncInMemoryTransport(queue="batch", store=store)
        with spans.tracer.start_as_current_span("request"):
            return await transport.publish_many([(f"g{i}", Event(kind="k")) for i in range(3)])

    store = MemoryStore()
    ids = asyncio.run(main())
    producer = spans.one("publish batch")
    attributes = dict(producer.attributes or {})
    assert attributes["messaging.batch.message_count"] == len(ids) == 3
    assert attributes["messaging.operation.name"] == "publish_many"
    assert "messaging.message.id" not in attributes
    headers = stored_headers(InMemoryTransport(queue="batch", store=store))
    assert [h["traceparent"] for h in headers] == [traceparent_of(producer)] * 3


def test_a_traceparent_the_caller_set_is_kept(spans: Spans) -> None:
    transport = InMemoryTransport()
    mine = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with spans.tracer.start_as_current_span("request"):
        transport.publish("g", Event(kind="k", headers={"traceparent": mine}))
    assert stored_headers(transport) == [{"traceparent": mine}]


def test_tracestate_travels_with_the_traceparent(spans: Spans) -> None:
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

    upstream = SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0xB7AD6B7169203331,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("vendor", "abc")]),
    )
    transport = InMemoryTransport()
    with trace.use_span(NonRecordingSpan(upstream)):
        transport.publish("g", Event(kind="k"))
    [headers] = stored_headers(transport)
    producer = spans.one("publish default")
    assert producer.context is not None
    assert producer.context.trace_id == upstream.trace_id
    assert headers == {"traceparent": traceparent_of(producer), "tracestate": "vendor=abc"}


def test_without_a_tracer_provider_the_current_context_is_injected_and_no_span_made() -> None:
    # the API's default (proxy) provider: no span is made, an upstream context still travels
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    upstream = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1))
    transport = InMemoryTransport()
    transport.publish("g1", Event(kind="k"))
    with trace.use_span(NonRecordingSpan(upstream)):
        transport.publish("g2", Event(kind="k"))
    assert stored_headers(transport) == [
        {},
        {"traceparent": f"00-{0x1234:032x}-{0x5678:016x}-01"},
    ]


def test_with_no_span_current_the_publish_span_starts_the_trace(spans: Spans) -> None:
    transport = InMemoryTransport()
    transport.publish("g", Event(kind="k"))
    # the publish's own span is current while it validates the event: it is injected
    producer = spans.one("publish default")
    assert stored_headers(transport) == [{"traceparent": traceparent_of(producer)}]


def test_the_size_limit_holds_with_the_trace_context(spans: Spans) -> None:
    limit = 400
    transport = InMemoryTransport(max_event_bytes=limit)
    base = Event(kind="k", data="")
    room = limit - len(base.to_json().encode())
    fits_bare = base.model_copy(update={"data": "x" * (room - 10)})  # too big with traceparent
    with spans.tracer.start_as_current_span("request"):
        transport.publish("g1", fits_bare)
        with pytest.raises(InvalidInput, match="max_event_bytes"):
            transport.publish("g2", base.model_copy(update={"data": "x" * (room + 1)}))
        small = Event(kind="k")
        transport.publish("g3", small)
    headers = stored_headers(transport)
    assert headers[0] == {}  # stored without the context rather than refused
    assert "traceparent" in headers[1]
    failed = spans.finished("publish default")[1]
    assert failed.status.status_code is StatusCode.ERROR


# ----------------------------------------------------------------------------- worker


def run_sync(store: MemoryStore, handler: Any, **options: Any) -> None:
    worker = Worker(InMemoryTransport(queue="orders", store=store), handler, **FAST, **options)
    worker.run(stop_when_idle=True, install_signal_handlers=False)


def run_async(store: MemoryStore, handler: Any, **options: Any) -> None:
    async def main() -> None:
        transport = AsyncInMemoryTransport(queue="orders", store=store)
        worker = AsyncWorker(transport, handler, **FAST, **options)
        await worker.run(stop_when_idle=True, install_signal_handlers=False)

    asyncio.run(main())


def check_consumer(spans: Spans, consumer: ReadableSpan, message_id: int, attempt: int) -> None:
    producer = spans.one("publish orders")
    assert consumer.kind is SpanKind.CONSUMER
    assert consumer.context is not None
    assert producer.context is not None
    assert consumer.context.trace_id == producer.context.trace_id
    assert consumer.parent is not None
    assert consumer.parent.span_id == producer.context.span_id
    attributes = dict(consumer.attributes or {})
    assert attributes["messaging.system"] == "pgque"
    assert attributes["messaging.destination.name"] == "orders"
    assert attributes["messaging.operation.type"] == "process"
    assert attributes["messaging.message.id"] == str(message_id)
    assert attributes["pgque.group"] == "g1"
    assert attributes["pgque.attempt"] == attempt


def publish_one(spans: Spans, store: MemoryStore) -> int:
    transport = InMemoryTransport(queue="orders", store=store)
    with spans.tracer.start_as_current_span("request"):
        return transport.publish("g1", Event(kind="order.created", data={"n": 1}))


HANDLER_KINDS = ["sync worker", "async worker, async handler", "async worker, sync handler"]


def run(kind: str, store: MemoryStore, handler: Any, **options: Any) -> None:
    if kind == "sync worker":
        run_sync(store, handler, **options)
        return
    if kind == "async worker, async handler":

        async def async_handler(event: Event) -> None:
            await asyncio.sleep(0)  # the span stays current across a suspension
            handler(event)

        run_async(store, async_handler, **options)
        return
    run_async(store, handler, **options)


@pytest.mark.parametrize("kind", HANDLER_KINDS)
def test_the_consumer_span_is_the_producer_spans_child_and_the_handlers_parent(
    spans: Spans, kind: str
) -> None:
    store = MemoryStore()
    message_id = publish_one(spans, store)

    def handler(event: Event) -> None:
        with spans.tracer.start_as_current_span("handler work"):
            pass

    run(kind, store, handler)
    consumer = spans.one("process orders")
    check_consumer(spans, consumer, message_id, attempt=1)
    assert dict(consumer.attributes or {})["pgque.outcome"] == "acked"
    assert dict(consumer.attributes or {})["pgque.event.kind"] == "order.created"
    assert consumer.status.status_code is StatusCode.UNSET
    inner = spans.one("handler work")
    assert inner.parent is not None
    assert consumer.context is not None
    assert inner.parent.span_id == consumer.context.span_id
    assert consumer.end_time is not None
    assert inner.end_time is not None
    assert inner.end_time <= consumer.end_time


@pytest.mark.parametrize("kind", HANDLER_KINDS)
def test_a_failure_is_retried_with_the_exception_recorded(spans: Spans, kind: str) -> None:
    store = MemoryStore()
    message_id = publish_one(spans, store)
    calls: list[int] = []

    def handler(event: Event) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("boom")

    run(kind, store, handler)
    first, second = spans.finished("process orders")
    check_consumer(spans, first, message_id, attempt=1)
    check_consumer(spans, second, message_id, attempt=2)
    assert dict(first.attributes or {})["pgque.outcome"] == "retried"
    assert first.status.status_code is StatusCode.ERROR
    [exception] = first.events
    assert exception.name == "exception"
    assert dict(exception.attributes or {})["exception.type"] == "ValueError"
    assert dict(second.attributes or {})["pgque.outcome"] == "acked"
    assert second.status.status_code is StatusCode.UNSET


@pytest.mark.parametrize("kind", HANDLER_KINDS)
def test_a_reject_is_dead_lettered(spans: Spans, kind: str) -> None:
    store = MemoryStore()
    message_id = publish_one(spans, store)

    def handler(event: Event) -> None:
        raise Reject("bad order")

    run(kind, store, handler)
    consumer = spans.one("process orders")
    check_consumer(spans, consumer, message_id, attempt=1)
    assert dict(consumer.attributes or {})["pgque.outcome"] == "dead_lettered"
    assert consumer.status.status_code is StatusCode.ERROR


def test_a_hard_timeout_ends_the_span_timed_out(spans: Spans) -> None:
    store = MemoryStore()
    publish_one(spans, store)
    attempts: list[int] = []

    async def handler(event: Event) -> None:
        attempts.append(1)
        if len(attempts) == 1:
            await asyncio.sleep(10)

    run_async(store, handler, hard_timeout=0.05, visibility=0.2)
    first = spans.finished("process orders")[0]
    assert dict(first.attributes or {})["pgque.outcome"] == "timed_out"
    assert first.status.status_code is StatusCode.ERROR
    assert first.events == ()  # a cancelled handler is not recorded as its exception


def test_tracing_false_makes_no_consumer_span(spans: Spans) -> None:
    store = MemoryStore()
    publish_one(spans, store)
    run_sync(store, lambda event: None, tracing=False)
    assert spans.finished("process orders") == []
    assert not WorkerTracing("q", False).enabled


def test_tracing_must_be_a_bool_or_none() -> None:
    with pytest.raises(InvalidInput, match="tracing"):
        Worker(InMemoryTransport(), lambda event: None, tracing="yes")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- installs


def run_python(code: str, **env: str) -> dict[str, Any]:
    """Run *code* in a fresh interpreter; return the JSON it printed last."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


PUBLISH_AND_WORK = """
    import json
    from pgque.core import Event, InMemoryTransport, Worker, ConfigurationError
    from pgque.core import tracing
    %s
    transport = InMemoryTransport()
    with ctx():
        transport.publish("g", Event(kind="k"))
    seen = []
    worker = Worker(transport, lambda event: seen.append(dict(event.headers)))
    worker.run(stop_when_idle=True, install_signal_handlers=False)
    try:
        tracing.WorkerTracing("q", True)
        explicit = "ok"
    except ConfigurationError as exc:
        explicit = str(exc)
    print(json.dumps({"headers": seen, "available": tracing.available(), "explicit": explicit}))
"""


def test_without_opentelemetry_pgque_works_unchanged() -> None:
    blocked = """
    import sys, contextlib
    for name in ("opentelemetry", "opentelemetry.trace", "opentelemetry.context"):
        sys.modules[name] = None  # as if opentelemetry-api were not installed
    ctx = contextlib.nullcontext
    """
    result = run_python(PUBLISH_AND_WORK % textwrap.dedent(blocked).replace("\n", "\n    "))
    assert result["headers"] == [{}]
    assert result["available"] is False
    assert "opentelemetry-api" in result["explicit"]
    assert "pgque-core[otel]" in result["explicit"]


def test_pgque_tracing_off_turns_injection_off() -> None:
    upstream = """
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
    span = NonRecordingSpan(SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1)))
    ctx = lambda: trace.use_span(span)
    """
    code = PUBLISH_AND_WORK % textwrap.dedent(upstream).replace("\n", "\n    ")
    on = run_python(code)
    assert on["headers"] == [{"traceparent": f"00-{0x1234:032x}-{0x5678:016x}-01"}]
    assert on["available"] is True
    assert on["explicit"] == "ok"
    off = run_python(code, PGQUE_TRACING="off")
    assert off["headers"] == [{}]
    assert off["available"] is False
