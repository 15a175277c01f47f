"""Recorded OpenTelemetry spans for tests of pgque's tracing (needs opentelemetry-sdk).

The plugin's ``otel_spans`` fixture installs a :class:`Spans` as the tracer provider pgque
finds (for one test) and shuts it down after. The SDK is imported when a :class:`Spans` is
made, so importing this module needs nothing beyond pgque.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["Spans", "traceparent_of"]


class Spans:
    """A tracer provider whose finished spans are kept in memory.

    Raises ImportError, naming the package, when opentelemetry-sdk is not installed.
    """

    def __init__(self) -> None:
        try:
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                InMemorySpanExporter,
            )
        except ImportError as exc:  # pragma: no cover - the sessions install it
            raise ImportError("recording spans needs opentelemetry-sdk installed") from exc
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        #: a tracer of this provider, for the spans a test makes itself
        self.tracer: Any = self.provider.get_tracer("app")

    def finished(self, name: str | None = None) -> list[ReadableSpan]:
        """The spans ended so far (of *name* only, when given), in the order they ended."""
        spans = self.exporter.get_finished_spans()
        return [s for s in spans if name is None or s.name == name]

    def one(self, name: str) -> ReadableSpan:
        """The one span of *name* that ended; fails the test when there are none or several."""
        found = self.finished(name)
        assert len(found) == 1, [s.name for s in self.finished()]
        return found[0]


def traceparent_of(span: ReadableSpan) -> str:
    """The W3C ``traceparent`` header that names *span*."""
    ctx = span.context
    assert ctx is not None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
