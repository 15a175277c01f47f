"""Route messages to handlers by their ``event.kind``: one worker for many kinds of message.

::

    from pgque.core import Router

    router = Router()

    @router.on("order.created")
    def created(event): ...

    @router.on("order.paid", "order.refunded")
    def money(event, lease): ...

A :class:`Router` is a handler: give it to :class:`~pgque.core.Worker`,
:class:`~pgque.core.AsyncWorker` or ``pgque worker MODULE:ROUTER``. See docs/worker.md,
"Routing by kind".
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any, Literal, TypeVar, get_args

from pgque.core.errors import InvalidInput
from pgque.core.models import Event, Lease
from pgque.core.worker import Reject, Retry
from pgque.core.worker._running.handlers import is_async_callable, wants_lease
from pgque.core.worker._running.threads import run_in_thread

__all__ = ["Router", "UnknownKind", "UnknownKindPolicy"]

H = TypeVar("H", bound=Callable[..., Any])

#: What a :class:`Router` without a default handler does with a kind it has no handler for.
UnknownKindPolicy = Literal["dead_letter", "retry"]

#: The longest ``event.kind`` (as :class:`~pgque.core.Event` allows).
_MAX_KIND_CHARS = 256


class UnknownKind(Retry):
    """Raised by a ``Router(unknown="retry")`` for a kind it has no handler for.

    A :class:`~pgque.core.worker.Retry` without a delay: the worker nacks the message with its
    :class:`~pgque.core.RetryPolicy` backoff, and the message's error (``nack(error=)``) names
    the kind and the kinds the router knows. ``max_attempts`` still applies.
    """

    def __init__(self, kind: str, known: tuple[str, ...]) -> None:
        super().__init__()
        self.kind = kind
        self.known = known
        self.args = (f"{_no_handler(kind, known)}; retrying (Router unknown='retry')",)


def _no_handler(kind: str, known: tuple[str, ...]) -> str:
    names = ", ".join(repr(k) for k in known) if known else "none"
    return f"no handler for kind {kind!r} (the router knows: {names})"


class _Route:
    """One registered handler and how to call it."""

    __slots__ = ("handler", "is_async", "wants_lease")

    def __init__(self, handler: Callable[..., Any]) -> None:
        self.handler = handler
        self.wants_lease = wants_lease(handler)  # raises InvalidInput for a bad signature
        self.is_async = is_async_callable(handler)

    def args(self, event: Event, lease: Lease) -> tuple[Any, ...]:
        return (event, lease) if self.wants_lease else (event,)


class Router:
    """A handler that calls another handler chosen by ``event.kind``.

    Register handlers with :meth:`on` (one kind may have one handler) and, for every other
    kind, :meth:`default` or ``Router(default=handler)``. A kind with no handler and no
    default is handled as *unknown* says:

    - ``"dead_letter"`` (the default): the router raises :class:`~pgque.core.Reject`, so the
      message is dead-lettered at once with a reason naming the kind and the kinds the router
      knows (its group goes on; ``redrive`` brings it back once a handler exists);
    - ``"retry"``: the router raises :class:`UnknownKind` (a ``Retry``), so the message is
      retried with the worker's backoff, for a rolling deploy where a newer worker knows the
      kind; after ``max_attempts`` the transport's ``on_exhausted`` applies.

    Each handler takes ``(event)`` or ``(event, lease)``, and may be sync or ``async def``.
    A router whose handlers are all sync is a sync handler (``Worker``; ``AsyncWorker`` runs
    it in a thread, as any sync handler). Once any handler is async, the router is async:
    calling it returns a coroutine, so it needs ``AsyncWorker`` (``Worker`` refuses it), and
    its sync handlers run each in a thread of their own, never blocking the event loop.
    A router already given to a worker as a sync handler refuses an async handler.

    Raises InvalidInput for an *unknown* other than ``"dead_letter"`` or ``"retry"``, or a
    *default* that is not a handler.
    """

    def __init__(
        self,
        *,
        default: Callable[..., Any] | None = None,
        unknown: UnknownKindPolicy = "dead_letter",
    ) -> None:
        if unknown not in get_args(UnknownKindPolicy):
            choices = " or ".join(repr(c) for c in get_args(UnknownKindPolicy))
            raise InvalidInput(f"unknown must be {choices}, not {unknown!r}")
        self._unknown: UnknownKindPolicy = unknown
        self._routes: dict[str, _Route] = {}
        self._default: _Route | None = None
        self._lock = threading.Lock()
        self._async = False
        self._inspected_sync = False
        if default is not None:
            self.default(default)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds with a handler of their own, in the order they were registered."""
        return tuple(self._routes)

    @property
    def unknown(self) -> UnknownKindPolicy:
        """What happens to a kind with no handler when there is no default."""
        return self._unknown

    @property
    def is_async(self) -> bool:
        """True once any handler (the default included) is async: calling returns a coroutine."""
        return self._async

    @property
    def __pgque_async__(self) -> bool:
        """How a worker asks whether calling the router returns a coroutine (see is_async).

        Asked by a worker when it is built: a router found sync then refuses async handlers,
        which would make it return coroutines to a worker that does not await them.
        """
        with self._lock:
            found = self.is_async
            if not found:
                self._inspected_sync = True
            return found

    def on(self, kind: str, *kinds: str) -> Callable[[H], H]:
        """Return a decorator registering a handler for *kind* (and any further *kinds*).

        The decorated function is returned unchanged. Raises InvalidInput for a kind that is
        not a non-empty str of at most 256 characters, a kind already registered (even in the
        same call) or a handler that cannot take an event.
        """
        wanted = (kind, *kinds)
        for name in wanted:
            if not isinstance(name, str) or not name or len(name) > _MAX_KIND_CHARS:
                raise InvalidInput(
                    f"a kind must be a non-empty str of at most {_MAX_KIND_CHARS} "
                    f"characters, not {name!r}"
                )
        if len(set(wanted)) != len(wanted):
            raise InvalidInput(f"a kind is given twice in {wanted!r}")

        def register(handler: H) -> H:
            route = _Route(handler)
            with self._lock:
                taken = [name for name in wanted if name in self._routes]
                if taken:
                    raise InvalidInput(
                        f"kind {taken[0]!r} already has a handler: "
                        f"{_name_of(self._routes[taken[0]].handler)}"
                    )
                self._check_async(route)
                self._async = self._async or route.is_async
                for name in wanted:
                    self._routes[name] = route
            return handler

        return register

    def default(self, handler: H) -> H:
        """Register *handler* for every kind without a handler of its own; return it.

        Usable as a decorator (``@router.default``). Raises InvalidInput if the router
        already has a default or *handler* cannot take an event.
        """
        route = _Route(handler)
        with self._lock:
            if self._default is not None:
                raise InvalidInput(
                    f"the router already has a default handler: {_name_of(self._default.handler)}"
                )
            self._check_async(route)
            self._async = self._async or route.is_async
            self._default = route
        return handler

    def handler_for(self, kind: str) -> Callable[..., Any] | None:
        """Return the handler that *kind* goes to (the default when it has none), or None."""
        route = self._routes.get(kind, self._default)
        return None if route is None else route.handler

    def __call__(self, event: Event, lease: Lease) -> Any:
        """Call the handler of ``event.kind`` with ``(event)`` or ``(event, lease)``.

        A sync router returns what the handler returns; an async router returns a coroutine
        that runs it. Raises :class:`~pgque.core.Reject` or :class:`UnknownKind` for a kind
        with no handler (see *unknown*), and whatever the handler raises.
        """
        route = self._routes.get(event.kind, self._default)
        if self._async:
            return self._call_async(route, event, lease)
        if route is None:
            raise self._unknown_error(event.kind)
        return route.handler(*route.args(event, lease))

    def __repr__(self) -> str:
        default = "" if self._default is None else f", default={_name_of(self._default.handler)}"
        return f"Router(kinds={list(self._routes)!r}{default}, unknown={self._unknown!r})"

    async def _call_async(self, route: _Route | None, event: Event, lease: Lease) -> Any:
        if route is None:
            raise self._unknown_error(event.kind)
        args = route.args(event, lease)
        if route.is_async:
            return await route.handler(*args)
        # A fresh thread, not the loop's pool: a handler abandoned at its hard timeout must not
        # hold a pool thread that later handlers would wait for.
        return await asyncio.wrap_future(run_in_thread(route.handler, *args, name="pgque-route"))

    def _unknown_error(self, kind: str) -> Exception:
        if self._unknown == "retry":
            return UnknownKind(kind, self.kinds)
        return Reject(_no_handler(kind, self.kinds))

    def _check_async(self, route: _Route) -> None:
        if route.is_async and self._inspected_sync and not self._async:
            raise InvalidInput(
                f"{_name_of(route.handler)} is async, but this router is already used as a sync "
                "handler (a worker inspected it): register async handlers before building a worker"
            )


def _name_of(handler: Callable[..., Any]) -> str:
    name = getattr(handler, "__qualname__", None) or type(handler).__qualname__
    module = getattr(handler, "__module__", None)
    return f"{module}.{name}" if module and not inspect.isbuiltin(handler) else str(name)
