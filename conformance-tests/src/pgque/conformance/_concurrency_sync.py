"""The concurrency tests of the blocking suite: threads, each with its own transport.

Hand-written (not generated): threads and tasks need different synchronisation. Its asyncio
counterpart is ``_concurrency_async.py``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from pgque.conformance._harness_sync import Harness
from pgque.core import Event, Lease, SupportsWakeups, Transport

__all__ = [
    "test_concurrent_drain_threads",
    "test_pause_racing_claims",
    "test_redrive_racing_publishes",
    "test_one_tick_racing_from_several_workers",
    "test_a_waiter_caps_its_wait_for_a_message_scheduled_meanwhile",
    "GROUPS",
    "PER_GROUP",
    "WORKERS",
]

GROUPS = 40
PER_GROUP = 25
WORKERS = 8
#: Only reached when the transport loses a message; a correct run takes a small fraction.
DEADLINE_S = 60.0


def test_concurrent_drain_threads(harness: Harness) -> None:
    """8 threads drain 40 groups x 25 messages: exactly once, FIFO per group, one holder."""
    first = harness.open()
    first.publish_many(
        [
            (f"g{g:02d}", Event(kind="work", data={"seq": seq}))
            for seq in range(PER_GROUP)
            for g in range(GROUPS)
        ]
    )
    workers = [harness.make(queue=first.queue) for _ in range(WORKERS)]
    total = GROUPS * PER_GROUP
    lock = threading.Lock()
    processed: dict[str, list[int]] = {}
    holders: dict[str, int] = {}
    problems: list[str] = []
    done = [0]
    deadline = time.monotonic() + DEADLINE_S

    def work(index: int, transport: Transport) -> None:
        try:
            while True:
                with lock:
                    if done[0] >= total or problems:
                        return
                if time.monotonic() > deadline:
                    with lock:
                        problems.append(f"worker {index} gave up: messages were lost")
                    return
                lease = transport.claim(30.0)
                if lease is None:
                    time.sleep(0.001)
                    continue
                group = lease.group_id
                with lock:
                    if group in holders:
                        problems.append(f"{group} held by {holders[group]} and {index}")
                    holders[group] = index
                time.sleep(0)  # let every other thread try to take the same group
                data = lease.event.data
                seq = data["seq"] if isinstance(data, dict) else None
                with lock:
                    if not isinstance(seq, int):
                        problems.append(f"bad payload {data!r}")
                        return
                    processed.setdefault(group, []).append(seq)
                    done[0] += 1
                    del holders[group]
                if not transport.ack(lease):
                    with lock:
                        problems.append(f"ack of {group}#{seq} was refused")
        except Exception as exc:  # a worker's failure must fail the test, not vanish
            with lock:
                problems.append(f"worker {index} raised {exc!r}")

    threads = [
        threading.Thread(target=work, args=(i, t), name=f"pgque-drain-{i}")
        for i, t in enumerate(workers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert problems == []
    assert processed == {f"g{g:02d}": list(range(PER_GROUP)) for g in range(GROUPS)}
    stats = first.stats()
    assert (stats.groups, stats.messages, stats.in_flight) == (0, 0, 0)


PAUSE_GROUPS = 12
PAUSE_PER_GROUP = 40
PAUSE_WORKERS = 6
#: Deliveries between two pauses, so each pause meets claims in flight.
PAUSE_EVERY = 8


def _seq(lease: Lease) -> int:
    data = lease.event.data
    assert isinstance(data, dict)
    seq = data["seq"]
    assert isinstance(seq, int)
    return seq


def _run_threads(targets: list[Callable[[], None]], problems: list[str]) -> None:
    """Run each target in a thread; a target's exception becomes a problem."""

    def guarded(target: Callable[[], None]) -> None:
        try:
            target()
        except Exception as exc:  # a thread's failure must fail the test, not vanish
            problems.append(f"{target.__name__} raised {exc!r}")

    threads = [
        threading.Thread(target=guarded, args=(t,), name=f"pgque-conc-{i}")
        for i, t in enumerate(targets)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_S + 10.0)
    assert not any(thread.is_alive() for thread in threads), "a thread never finished"


def test_pause_racing_claims(harness: Harness) -> None:
    """Threads claim while groups are paused one by one: once ``pause`` has returned True, no
    claim started after it leases that group; leases already out still ack."""
    first = harness.open()
    groups = [f"p{g:02d}" for g in range(PAUSE_GROUPS)]
    first.publish_many(
        [(g, Event(kind="work", data={"seq": s})) for s in range(PAUSE_PER_GROUP) for g in groups]
    )
    workers = [harness.make(queue=first.queue) for _ in range(PAUSE_WORKERS)]
    lock = threading.Lock()
    ticks = [0]  # one order for claim starts and pause ends
    paused_at: dict[str, int] = {}
    leased: list[tuple[str, int, int]] = []  # group, seq, tick of the claim's start
    problems: list[str] = []
    stop = threading.Event()
    deadline = time.monotonic() + DEADLINE_S

    def tick() -> int:
        with lock:
            ticks[0] += 1
            return ticks[0]

    def worker(transport: Transport) -> Callable[[], None]:
        def work() -> None:
            while not stop.is_set() and not problems:
                started = tick()
                lease = transport.claim(30.0)
                if lease is None:
                    time.sleep(0.001)
                    continue
                with lock:
                    leased.append((lease.group_id, _seq(lease), started))
                time.sleep(0)  # let the operator pause while this lease is out
                if not transport.ack(lease):
                    problems.append(f"ack of {lease.group_id}#{_seq(lease)} was refused")

        return work

    def operator() -> None:
        try:
            for index, group in enumerate(groups):
                while len(leased) < (index + 1) * PAUSE_EVERY and time.monotonic() < deadline:
                    time.sleep(0.0005)
                if first.pause(group) is not True:
                    problems.append(f"pause({group!r}) did not return True")
                paused_at[group] = tick()
            # Let every worker start several more claims: all of them must come back empty.
            settle = tick() + 10 * PAUSE_WORKERS
            while ticks[0] < settle and time.monotonic() < deadline:
                time.sleep(0.001)
        finally:
            stop.set()

    _run_threads([operator, *(worker(t) for t in workers)], problems)
    assert problems == []
    late = [(g, s, t) for g, s, t in leased if t > paused_at[g]]
    assert late == [], "leases granted by claims that started after the pause returned"
    done: dict[str, list[int]] = {g: [] for g in groups}
    for group, seq, _tick in leased:
        done[group].append(seq)
    for group in groups:
        info = first.group(group)
        assert info is not None
        assert (info.state, info.depth) == ("paused", PAUSE_PER_GROUP - len(done[group]))
    assert first.claim() is None
    for group in groups:
        assert first.resume(group)
    while lease := first.claim(30.0):
        done[lease.group_id].append(_seq(lease))
        assert first.ack(lease)
    assert done == {g: list(range(PAUSE_PER_GROUP)) for g in groups}


REDRIVE_PUBLISHERS = 4
REDRIVE_EACH = 30


def test_redrive_racing_publishes(harness: Harness) -> None:
    """Publishers append to a group while its dead letters are redriven in place: nothing is
    lost or doubled, and the group then delivers in message id order."""
    first = harness.open()
    harness.require("dead_letters")
    for n in range(6):
        first.publish("g", Event(kind="seed", data={"seq": n}))
    for _ in range(6):
        lease = first.claim(30.0)
        assert lease is not None
        assert first.dead_letter(lease, "seed")
    dead = first.dead_letters()
    assert len(dead) == 6
    publishers = [harness.make(queue=first.queue) for _ in range(REDRIVE_PUBLISHERS)]
    redriver = harness.make(queue=first.queue)
    lock = threading.Lock()
    published: list[int] = []
    redriven = [0]
    problems: list[str] = []

    def publisher(index: int, transport: Transport) -> Callable[[], None]:
        def publish() -> None:
            for k in range(REDRIVE_EACH):
                event = Event(kind="live", data={"seq": 1000 * (index + 1) + k})
                message_id = transport.publish("g", event)
                with lock:
                    published.append(message_id)

        return publish

    def redrive() -> None:
        for letter in dead:
            time.sleep(0)
            redriven[0] += redriver.redrive([letter.id])

    _run_threads([redrive, *(publisher(i, t) for i, t in enumerate(publishers))], problems)
    assert problems == []
    assert redriven[0] == 6
    delivered: list[int] = []
    while lease := first.claim(30.0):
        delivered.append(lease.message_id)
        assert first.ack(lease)
    assert delivered == sorted([d.message_id for d in dead] + published)
    assert first.dead_letters() == []


TICK_WORKERS = 8
TICKS = 10


def test_one_tick_racing_from_several_workers(harness: Harness) -> None:
    """8 threads publish each of 10 ticks of one entry at once: each tick is appended once."""
    first = harness.open()
    harness.require("scheduling")
    workers = [first, *[harness.make(queue=first.queue) for _ in range(TICK_WORKERS - 1)]]
    barrier = threading.Barrier(TICK_WORKERS, timeout=DEADLINE_S)
    results: list[list[int | None]] = [[None] * TICK_WORKERS for _ in range(TICKS)]
    problems: list[str] = []

    def worker(index: int, transport: Transport) -> Callable[[], None]:
        def publish_ticks() -> None:
            for tick in range(1, TICKS + 1):
                barrier.wait()  # every worker publishes this tick at the same moment
                event = Event(kind="tick", data={"seq": index})
                results[tick - 1][index] = transport.publish_tick("every", float(tick), "g", event)

        return publish_ticks

    _run_threads([worker(i, t) for i, t in enumerate(workers)], problems)
    assert problems == []
    winners: list[int] = []
    for tick, row in enumerate(results, start=1):
        won = [i for i, r in enumerate(row) if r is not None]
        assert len(won) == 1, f"tick {tick}: {len(won)} workers appended it"
        winners.append(won[0])
    assert first.last_tick("every") == float(TICKS)
    assert first.stats().messages == TICKS
    delivered: list[int] = []
    while lease := first.claim(30.0):
        delivered.append(_seq(lease))
        assert first.ack(lease)
    assert delivered == winners


#: Real seconds from the delayed publish to its due time, and how late a waiter may return.
WAKE_DELAY_S = 0.8
WAKE_SLACK_S = 0.5


def test_a_waiter_caps_its_wait_for_a_message_scheduled_meanwhile(harness: Harness) -> None:
    """A waiter that began with a long timeout before a sooner-due message was scheduled (by
    another worker), waiting again after every wake-up as a worker does, returns True by that
    message's due time: the publish's own wake-up may end one wait early, and the next wait
    must then be capped at the due time (not last its 30 seconds)."""
    waiter = harness.open()
    harness.require("scheduling")
    harness.require("wakeups")
    assert isinstance(waiter, SupportsWakeups)
    publisher = harness.make(queue=waiter.queue)
    quiet = False
    for _ in range(10):  # the first waits may return at once (a new listener)
        if not waiter.wait_for_messages(0.05):
            quiet = True
            break
    assert quiet, "an idle waiter with nothing due within its timeout must return False"
    due: list[float] = []  # the due time by this clock, once published
    outcome: list[tuple[bool, float]] = []
    problems: list[str] = []

    def work() -> None:
        try:
            while True:
                woke = waiter.wait_for_messages(30.0)
                at = time.monotonic()
                outcome.append((woke, at))
                if not woke or (due and at >= due[0]) or len(outcome) > 10_000:
                    return
        except Exception as exc:  # reported by the test's thread
            problems.append(repr(exc))

    thread = threading.Thread(target=work, name="pgque-waiter")
    thread.start()
    time.sleep(0.2)
    assert thread.is_alive()
    published = time.monotonic()
    due.append(published + WAKE_DELAY_S)
    try:
        publisher.publish("g", Event(kind="later"), delay=WAKE_DELAY_S)
    except Exception as exc:  # the waiter thread must still be joined
        problems.append(repr(exc))
    thread.join(WAKE_DELAY_S + WAKE_SLACK_S + 31.0)
    assert problems == []
    assert not thread.is_alive(), "the waiter never returned"
    assert all(woke for woke, _at in outcome), f"a wait ran its 30 s past the due: {outcome}"
    at = outcome[-1][1]
    assert at >= due[0]
    assert at - published <= WAKE_DELAY_S + WAKE_SLACK_S, "a wait outlasted the due time"
