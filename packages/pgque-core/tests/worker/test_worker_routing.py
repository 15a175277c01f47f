"""Router: handlers chosen by event.kind, run by Worker and AsyncWorker, unknown kinds."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from _worker_helpers import KINDS, make_worker, run

from pgque.core import (
    AsyncInMemoryTransport,
    Event,
    InMemoryTransport,
    InvalidInput,
    Lease,
    MemoryStore,
    Reject,
    Retry,
    RetryPolicy,
    Router,
    Worker,
)
from pgque.core.routing import UnknownKind
from pgque.core.worker._running.handlers import is_async_callable, wants_lease

pytestmark = pytest.mark.timeout(30)

NO_WAIT = RetryPolicy(base=0, max_delay=0, jitter=0)


def _store(*kinds: str) -> MemoryStore:
    store = MemoryStore()
    queue = InMemoryTransport(store=store)
    for i, kind in enumerate(kinds):
        queue.publish(f"g{i}", Event(kind=kind, data={"i": i}))
    return store


def _transport(kind: str, store: MemoryStore, **options: Any) -> Any:
    return (InMemoryTransport if kind == "sync" else AsyncInMemoryTransport)(store=store, **options)


@pytest.mark.parametrize("kind", KINDS)
def test_routes_each_kind_to_its_handler_with_or_without_the_lease(kind: str) -> None:
    store = _store("order.created", "order.paid", "order.refunded", "order.created")
    seen: list[tuple[str, Any]] = []
    router = Router()

    @router.on("order.created")
    def created(event: Event) -> None:
        assert isinstance(event.data, dict)
        seen.append(("created", event.data["i"]))

    @router.on("order.paid", "order.refunded")
    def money(event: Event, lease: Lease) -> None:
        seen.append((event.kind, lease.group_id))

    assert router.kinds == ("order.created", "order.paid", "order.refunded")
    assert router.handler_for("order.refunded") is money
    assert router.handler_for("other") is None
    report = run(make_worker(kind, _transport(kind, store), router))
    assert report.acked == 4
    assert sorted(seen, key=str) == sorted(
        [("created", 0), ("order.paid", "g1"), ("order.refunded", "g2"), ("created", 3)], key=str
    )


@pytest.mark.parametrize("how", ["decorator", "constructor"])
def test_default_takes_every_other_kind(how: str) -> None:
    store = _store("known", "other", "another")
    seen: list[str] = []

    def fallback(event: Event, lease: Lease) -> None:
        seen.append(f"default:{event.kind}:{lease.attempt}")

    router = Router(default=fallback) if how == "constructor" else Router()
    if how == "decorator":
        assert router.default(fallback) is fallback

    @router.on("known")
    def known(event: Event) -> None:
        seen.append("known")

    assert run(make_worker("sync", InMemoryTransport(store=store), router)).acked == 3
    assert sorted(seen) == ["default:another:1", "default:other:1", "known"]
    assert router.handler_for("whatever") is fallback


@pytest.mark.parametrize("kind", KINDS)
def test_unknown_kind_is_dead_lettered_with_a_reason_naming_it(kind: str) -> None:
    store = _store("order.created", "order.shipped")
    router = Router()
    router.on("order.created")(lambda event: None)
    router.on("order.paid")(lambda event: None)
    report = run(make_worker(kind, _transport(kind, store), router))
    assert (report.acked, report.dead_lettered) == (1, 1)
    (letter,) = InMemoryTransport(store=store).dead_letters()
    expected = (
        "no handler for kind 'order.shipped' (the router knows: 'order.created', 'order.paid')"
    )
    assert (letter.group_id, letter.event.kind, letter.reason) == ("g1", "order.shipped", expected)
    assert letter.error is not None
    assert letter.error.type == "pgque.core.worker._policy.Reject"
    assert letter.error.message == expected


def test_unknown_kind_with_no_handlers_at_all_says_so() -> None:
    store = _store("x")
    run(make_worker("sync", InMemoryTransport(store=store), Router()))
    (letter,) = InMemoryTransport(store=store).dead_letters()
    assert letter.reason == "no handler for kind 'x' (the router knows: none)"


@pytest.mark.parametrize("kind", KINDS)
def test_unknown_kind_retry_nacks_with_backoff_until_max_attempts(kind: str) -> None:
    store = _store("new.kind")
    router = Router(unknown="retry")
    router.on("old.kind")(lambda event: None)
    assert router.unknown == "retry"
    transport = _transport(kind, store, max_attempts=3)
    report = run(make_worker(kind, transport, router, retry=NO_WAIT))
    assert (report.retried, report.dead_lettered, report.acked) == (2, 1, 0)
    (letter,) = InMemoryTransport(store=store).dead_letters()
    assert letter.reason == "max_attempts (3) exhausted"
    assert letter.error is not None
    assert letter.error.type == "pgque.core.routing.UnknownKind"
    assert letter.error.message == (
        "no handler for kind 'new.kind' (the router knows: 'old.kind'); "
        "retrying (Router unknown='retry')"
    )


def test_unknown_kind_retry_uses_the_worker_policy() -> None:
    error = UnknownKind("k", ("a",))
    assert isinstance(error, Retry)
    assert error.delay is None  # the worker's RetryPolicy decides
    assert (error.kind, error.known) == ("k", ("a",))


def test_router_refuses_bad_registrations() -> None:
    router = Router()
    router.on("a")(lambda event: None)
    with pytest.raises(InvalidInput, match="kind 'a' already has a handler"):
        router.on("b", "a")(lambda event: None)
    assert router.kinds == ("a",)  # nothing of the refused call was registered
    with pytest.raises(InvalidInput, match="given twice"):
        router.on("c", "c")
    for bad in ("", 7, "k" * 257):
        with pytest.raises(InvalidInput, match="non-empty str"):
            router.on(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="callable"):
        router.on("d")(42)  # type: ignore[type-var]
    with pytest.raises(InvalidInput, match="first positional parameter"):
        router.on("d")(lambda: None)
    router.default(lambda event: None)
    with pytest.raises(InvalidInput, match="already has a default"):
        router.default(lambda event: None)
    with pytest.raises(InvalidInput, match="unknown must be 'dead_letter' or 'retry'"):
        Router(unknown="drop")  # type: ignore[arg-type]


def test_worker_inspection_sees_the_router() -> None:
    router = Router()
    router.on("a")(lambda event: None)
    assert wants_lease(router) is True  # the router always passes the lease on
    assert is_async_callable(router) is False
    assert not router.is_async

    async def later(event: Event) -> None:
        pass

    # found sync by a worker: an async handler now would make it return coroutines unawaited
    with pytest.raises(InvalidInput, match="already used as a sync handler"):
        router.on("b")(later)
    router.on("c")(lambda event, lease: None)  # sync handlers may still come

    mixed = Router()
    mixed.on("a")(lambda event: None)
    mixed.on("b")(later)
    assert mixed.is_async
    assert is_async_callable(mixed) is True
    with pytest.raises(InvalidInput, match="has async handlers: run it with AsyncWorker"):
        Worker(InMemoryTransport(), mixed)


def test_async_router_awaits_async_handlers_and_threads_sync_ones() -> None:
    store = _store("async.kind", "sync.kind", "sync.lease", "missing")
    loop_thread: list[int] = []
    seen: dict[str, int] = {}
    router = Router()

    @router.on("async.kind")
    async def with_await(event: Event, lease: Lease) -> None:
        await asyncio.sleep(0)
        seen[event.kind] = threading.get_ident()

    @router.on("sync.kind")
    def blocking(event: Event) -> None:
        seen[event.kind] = threading.get_ident()

    @router.on("sync.lease")
    def blocking_lease(event: Event, lease: Lease) -> None:
        assert lease.event == event
        seen[event.kind] = threading.get_ident()

    async def main() -> Any:
        loop_thread.append(threading.get_ident())
        worker = make_worker("async", AsyncInMemoryTransport(store=store), router)
        return await worker.run(stop_when_idle=True, install_signal_handlers=False)

    report = asyncio.run(main())
    assert (report.acked, report.dead_lettered) == (3, 1)
    assert seen["async.kind"] == loop_thread[0]
    assert seen["sync.kind"] != loop_thread[0]  # never on the event loop
    assert seen["sync.lease"] != loop_thread[0]
    (letter,) = InMemoryTransport(store=store).dead_letters()
    assert letter.reason.startswith("no handler for kind 'missing'")


def test_async_default_makes_the_router_async_and_calls_return_coroutines() -> None:
    router = Router()
    router.on("a")(lambda event: "sync result")

    @router.default
    async def fallback(event: Event) -> str:
        return "async result"

    transport = InMemoryTransport()
    transport.publish("g", Event(kind="a"))
    transport.publish("h", Event(kind="b"))
    first, second = transport.claim(), transport.claim()
    assert first is not None
    assert second is not None

    async def main() -> list[Any]:
        return [await router(first.event, first), await router(second.event, second)]

    assert asyncio.run(main()) == ["sync result", "async result"]


def test_a_router_can_route_to_a_router() -> None:
    inner = Router()
    seen: list[str] = []
    inner.on("x")(lambda event, lease: seen.append(f"inner {lease.group_id}"))
    outer = Router(default=inner)
    outer.on("y")(lambda event: seen.append("outer"))
    report = run(make_worker("sync", InMemoryTransport(store=_store("x", "y", "z")), outer))
    assert (report.acked, report.dead_lettered) == (2, 1)
    assert sorted(seen) == ["inner g0", "outer"]
    assert "Router(kinds=['y']" in repr(outer)


def test_reject_raised_by_a_routed_handler_is_its_own() -> None:
    router = Router()

    @router.on("bad")
    def refuse(event: Event) -> None:
        raise Reject("bad sku")

    store = _store("bad")
    run(make_worker("sync", InMemoryTransport(store=store), router))
    (letter,) = InMemoryTransport(store=store).dead_letters()
    assert letter.reason == "bad sku"
