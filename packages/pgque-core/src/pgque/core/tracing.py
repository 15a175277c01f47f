"""OpenTelemetry tracing of publishes and handler runs (``pip install 'pgque-core[otel]'``).

Only ``opentelemetry-api`` is imported, and only when it is installed: without it pgque runs
unchanged. With it:

- every publish (``publish``, ``publish_many``, a partition publisher's ``send``; every
  transport) writes the current trace context into the event's headers, as W3C
  ``traceparent`` (and ``tracestate`` when there is one), unless the caller already set a
  ``traceparent``. The context written is the publish's own PRODUCER span when a tracer
  provider is configured, else whatever span is current (none: nothing is written).
- a PRODUCER span ``publish <queue>`` covers each publish call (one per ``publish_many``
  batch); a CONSUMER span ``process <queue>`` covers each handler run of a worker, a child
  of the producer's context carried in the headers, current while the handler runs (so the
  handler's own spans nest under it), ended when the message is settled, with the outcome.

Spans follow the OpenTelemetry messaging semantic conventions (``messaging.operation.type``
``send`` and ``process``, the current names; ``publish`` was the older name of ``send``);
what has no conventional name is a ``pgque.*`` attribute. Without a configured tracer
provider no span is made at all: a publish costs a look at the provider and the current span.

Turn off what is automatic with the environment variable ``PGQUE_TRACING=off`` (read once, at
the first use: no headers, no spans), or a worker's spans alone with ``Worker(...,
tracing=False)``. ``tracing=True`` is explicit and wins over the variable for that worker's
spans; it requires opentelemetry-api and raises :class:`~pgque.core.ConfigurationError`
without it.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pgque.core.errors import ConfigurationError, InvalidInput
from pgque.core.hints import install_hint
from pgque.core.models import Event, Lease

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "TRACING_ENV",
    "TRACEPARENT",
    "TRACESTATE",
    "MESSAGING_SYSTEM",
    "available",
    "require",
    "inject_trace_context",
    "current_trace_context",
    "with_trace_context",
    "traced_publish",
    "WorkerTracing",
]

#: The environment variable that turns tracing off (``off``, ``0``, ``false`` or ``no``).
TRACING_ENV = "PGQUE_TRACING"
#: The W3C trace context headers pgque writes into (and reads from) ``Event.headers``.
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
#: ``messaging.system`` of every pgque span.
MESSAGING_SYSTEM = "pgque"

_INSTALL_HINT = "OpenTelemetry tracing needs the opentelemetry-api package: " + install_hint(
    "pgque-core[otel]"
)
_OFF = frozenset(("off", "0", "false", "no"))

F = TypeVar("F", bound=Callable[..., Any])


class _Api:
    """The parts of opentelemetry-api pgque uses, imported once."""

    def __init__(self) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.trace = trace
        self.context = context
        # W3C trace context only, whatever the global propagators are: baggage would copy
        # arbitrary caller data into every stored message.
        self.propagator = TraceContextTextMapPropagator()
        self.no_provider = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
        self.cached: tuple[object, Tracer] | None = None

    def tracer(self) -> Tracer | None:
        """The tracer of the configured provider, or None while none is configured."""
        provider = self.trace.get_tracer_provider()
        if isinstance(provider, self.no_provider):
            return None
        cached = self.cached
        if cached is not None and cached[0] is provider:
            return cached[1]
        from pgque.core import __version__

        tracer = provider.get_tracer("pgque", __version__)
        self.cached = (provider, tracer)
        return tracer


_UNSET: Any = object()
_api: _Api | None = _UNSET
_enabled: _Api | None = _UNSET
_load_lock = threading.Lock()


def _import() -> _Api | None:
    """opentelemetry-api, or None when it is not installed (imported once)."""
    global _api
    if _api is _UNSET:
        with _load_lock:
            if _api is _UNSET:
                try:
                    _api = _Api()
                except ImportError:
                    _api = None
    return _api


def _active() -> _Api | None:
    """opentelemetry-api unless it is missing or ``PGQUE_TRACING`` turns tracing off."""
    global _enabled
    if _enabled is _UNSET:
        off = os.environ.get(TRACING_ENV, "").strip().lower() in _OFF
        _enabled = None if off else _import()
    return _enabled


def available() -> bool:
    """Return True if opentelemetry-api is importable and ``PGQUE_TRACING`` is not off."""
    return _active() is not None


def require() -> None:
    """Raise ConfigurationError (naming the extra to install) unless opentelemetry-api is there."""
    if _import() is None:
        raise ConfigurationError(_INSTALL_HINT)


# ---------------------------------------------------------------------------- producer side


def inject_trace_context(event: Event) -> Event:
    """Return *event* with the current trace context in its headers (or *event* itself).

    Nothing changes when tracing is off or unavailable, no valid span is current, or the
    headers already hold a ``traceparent`` (any letter case): the caller's context wins.
    """
    return with_trace_context(event, current_trace_context())


def current_trace_context() -> dict[str, str]:
    """Return the headers the current trace context adds to an event (empty when tracing is
    off or unavailable, or no valid span is current).

    A batch reads them once for all its events: they cannot change while it is checked.
    """
    api = _active()
    if api is None:
        return {}
    if not api.trace.get_current_span().get_span_context().is_valid:
        return {}
    carrier: dict[str, str] = {}
    api.propagator.inject(carrier)
    return carrier


def with_trace_context(event: Event, context: dict[str, str]) -> Event:
    """Return *event* with *context* (:func:`current_trace_context`) added to its headers, or
    *event* itself when *context* is empty or the headers hold a ``traceparent`` already."""
    if not context:
        return event
    headers = event.headers
    if any(name.lower() == TRACEPARENT for name in headers):
        return event
    return event.model_copy(update={"headers": {**headers, **context}})


#: Set while a pgque producer span is current: an inner publish (a partition publisher's send
#: calling its transport's publish) makes no second span.
_publishing: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "pgque_publishing", default=False
)


class _PublishSpan:
    """One producer span, current for the ``with`` block; records the call's result."""

    def __init__(self, api: _Api, tracer: Tracer, queue: str, operation: str) -> None:
        self._api = api
        attributes: dict[str, str] = {
            "messaging.system": MESSAGING_SYSTEM,
            "messaging.destination.name": queue,
            "messaging.operation.type": "send",
            "messaging.operation.name": operation,
        }
        self.span = tracer.start_span(
            f"publish {queue}", kind=api.trace.SpanKind.PRODUCER, attributes=attributes
        )
        self._tokens: tuple[contextvars.Token[Context], contextvars.Token[bool]] | None = None

    def __enter__(self) -> _PublishSpan:
        ctx = self._api.trace.set_span_in_context(self.span)
        self._tokens = (self._api.context.attach(ctx), _publishing.set(True))
        return self

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        assert self._tokens is not None
        context_token, flag_token = self._tokens
        _publishing.reset(flag_token)
        self._api.context.detach(context_token)
        if error is not None and isinstance(error, Exception):
            _failed(self._api, self.span, error)
        self.span.end()

    def result(self, result: object) -> None:
        """Record what the publish returned: a message id, a batch of them, or (id, deduped)."""
        span = self.span
        if isinstance(result, bool):
            return
        if isinstance(result, int):
            span.set_attribute("messaging.message.id", str(result))
        elif isinstance(result, list):
            span.set_attribute("messaging.batch.message_count", len(result))
        elif isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], int):
            span.set_attribute("messaging.message.id", str(result[0]))
            span.set_attribute("pgque.deduped", bool(result[1]))


def _publish_span(owner: object, operation: str, args: tuple[Any, ...]) -> _PublishSpan | None:
    """A producer span for a publish of *owner*, or None (off, no provider, nested)."""
    api = _active()
    if api is None or _publishing.get():
        return None
    tracer = api.tracer()
    if tracer is None:
        return None
    queue = getattr(owner, "queue", None)
    span = _PublishSpan(api, tracer, queue if isinstance(queue, str) else "", operation)
    if operation == "publish" and args and isinstance(args[0], str):
        span.span.set_attribute("pgque.group", args[0])
    return span


def traced_publish(method: F) -> F:
    """Wrap a transport's publish method (sync or ``async def``) in a PRODUCER span.

    For a method of an object with a ``queue`` attribute. Its result is recorded: an int is
    the message id, a list the ids of a batch (counted), an ``(id, deduped)`` pair a partition
    send. The method's name is ``messaging.operation.name``; a ``publish`` also records its
    first argument, the group id. The events it publishes get the span's context in their
    headers (:func:`inject_trace_context`, called by the front door, :mod:`pgque.core.client`).
    """
    operation = method.__name__
    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def traced_async(self: object, *args: Any, **kwargs: Any) -> Any:
            span = _publish_span(self, operation, args)
            if span is None:
                return await method(self, *args, **kwargs)
            with span:
                result = await method(self, *args, **kwargs)
                span.result(result)
                return result

        return traced_async  # type: ignore[return-value]

    @functools.wraps(method)
    def traced(self: object, *args: Any, **kwargs: Any) -> Any:
        span = _publish_span(self, operation, args)
        if span is None:
            return method(self, *args, **kwargs)
        with span:
            result = method(self, *args, **kwargs)
            span.result(result)
            return result

    return traced  # type: ignore[return-value]


# ---------------------------------------------------------------------------- consumer side


def _failed(api: _Api, span: Span, error: BaseException) -> None:
    span.record_exception(error)
    span.set_status(api.trace.Status(api.trace.StatusCode.ERROR, type(error).__name__))


class WorkerTracing:
    """The CONSUMER spans of one worker: :meth:`start` one per handler run, :meth:`finish` it.

    *enabled*: None traces when opentelemetry-api is importable (and ``PGQUE_TRACING`` is not
    off); False never; True always (``PGQUE_TRACING`` too, which only turns off what is
    automatic), and raises ConfigurationError without opentelemetry-api.
    A span is only made while a tracer provider is configured.
    """

    def __init__(self, queue: str, enabled: bool | None = None) -> None:
        if enabled is not None and not isinstance(enabled, bool):
            raise InvalidInput(f"tracing must be True, False or None, not {enabled!r}")
        if enabled:
            require()
        self._queue = queue
        self._api = None if enabled is False else (_import() if enabled else _active())
        self._spans: dict[str, Span] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether this worker makes spans (when a tracer provider is configured)."""
        return self._api is not None

    def start(self, lease: Lease, handler: Callable[..., Any]) -> Callable[..., Any]:
        """Start *lease*'s span; return *handler* bound to run with the span current.

        Returns *handler* itself when tracing is off or no tracer provider is configured.
        """
        api = self._api
        if api is None:
            return handler
        tracer = api.tracer()
        if tracer is None:
            return handler
        parent = api.propagator.extract(_carrier(lease.event.headers))
        attributes: dict[str, str | int] = {
            "messaging.system": MESSAGING_SYSTEM,
            "messaging.destination.name": self._queue,
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.message.id": str(lease.message_id),
            "pgque.group": lease.group_id,
            "pgque.attempt": lease.attempt,
            "pgque.event.id": lease.event.id,
            "pgque.event.kind": lease.event.kind,
        }
        span = tracer.start_span(
            f"process {self._queue}",
            context=parent,
            kind=api.trace.SpanKind.CONSUMER,
            attributes=attributes,
        )
        with self._lock:
            old = self._spans.pop(lease.token, None)
            self._spans[lease.token] = span
        if old is not None:
            old.end()
        return _bound(api, api.trace.set_span_in_context(span, parent), span, handler)

    def finish(self, lease: Lease, outcome: str) -> None:
        """End *lease*'s span (if it has one) with its outcome (``pgque.outcome``)."""
        if not self._spans:
            return
        with self._lock:
            span = self._spans.pop(lease.token, None)
        if span is None:
            return
        span.set_attribute("pgque.outcome", outcome)
        api = self._api
        if outcome == "timed_out" and api is not None:
            span.set_status(api.trace.Status(api.trace.StatusCode.ERROR, "hard_timeout"))
        span.end()


def _carrier(headers: Mapping[str, str]) -> dict[str, str]:
    """The trace context headers of *headers*, by their lower-case names."""
    return {k.lower(): v for k, v in headers.items() if k.lower() in (TRACEPARENT, TRACESTATE)}


def _bound(api: _Api, ctx: Any, span: Span, handler: Callable[..., Any]) -> Callable[..., Any]:
    """*handler*, run with *ctx* attached; an ``async def`` one's coroutine runs under it too."""

    def call(*args: Any) -> Any:
        token = api.context.attach(ctx)
        try:
            result = handler(*args)
        except Exception as exc:
            _failed(api, span, exc)
            raise
        finally:
            api.context.detach(token)
        if inspect.iscoroutine(result):
            return _awaited(api, ctx, span, result)
        return result

    return call


async def _awaited(api: _Api, ctx: Any, span: Span, awaitable: Awaitable[Any]) -> Any:
    token = api.context.attach(ctx)
    try:
        return await awaitable
    except Exception as exc:
        _failed(api, span, exc)
        raise
    finally:
        api.context.detach(token)
