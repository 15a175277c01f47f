"""Failure policies. pause: a poisoned event of key K holds K's later events (their attempt
counters do not grow) while other keys flow; once it is dead-lettered, K's later events flow
in order. skip: the poisoned event is dead-lettered after max_attempts and K moves on."""

from __future__ import annotations

import threading
from collections import defaultdict

from _partition_support import Make

from pgque.core.models import Event
from pgque.core.validation import exhausted_reason
from pgque.core.worker import RetryPolicy
from pgque.partition import KeyContext, KeyedPublisher, Ordered, PartitionConsumer, policy_options

FAST_RETRY = RetryPolicy(base=0.02, factor=1.0, max_delay=0.02, jitter=0.0)
KEYS = [f"tenant:{i}" for i in range(6)]
POISONED = "tenant:3"


def _setup(make: Make, policy: str) -> tuple[object, KeyedPublisher]:
    transport = make(**policy_options(policy, 2))  # type: ignore[arg-type]
    publisher = KeyedPublisher(transport, tier=Ordered())
    for seq in range(5):
        for key in KEYS:
            poison = key == POISONED and seq == 1
            publisher.send("FileCreated", {"seq": seq, "poison": poison}, partition_key=key)
    return transport, publisher


class _Log:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seqs: dict[str, list[int]] = defaultdict(list)
        self.attempts: dict[str, list[int]] = defaultdict(list)
        self.poison_calls = 0

    def handler(self, event: Event, ctx: KeyContext) -> None:
        assert ctx.key is not None
        data = event.data
        assert isinstance(data, dict)
        if data["poison"]:
            with self.lock:
                self.poison_calls += 1
            raise RuntimeError("poisoned")
        with self.lock:
            self.seqs[ctx.key].append(int(data["seq"]))  # type: ignore[arg-type]
            self.attempts[ctx.key].append(ctx.lease.attempt)


def test_pause_holds_the_key_until_its_failed_event_is_dead_lettered(
    transport_factory: Make,
) -> None:
    transport, _publisher = _setup(transport_factory, "pause")
    log = _Log()
    consumer = PartitionConsumer(
        transport,  # type: ignore[arg-type]
        log.handler,
        tier=Ordered(),
        policy="pause",
        concurrency=4,
        retry=FAST_RETRY,
        idle_backoff=(0.01, 0.05),
    )
    consumer.run(stop_when_idle=True)
    for key in KEYS:
        if key != POISONED:
            assert log.seqs[key] == [0, 1, 2, 3, 4]
    assert log.seqs[POISONED] == [0]  # held behind its failed event
    assert log.poison_calls == 2  # max_attempts, then the key is paused
    stats = transport.stats()  # type: ignore[attr-defined]
    assert stats.blocked == 1
    assert stats.messages == 4
    assert stats.dead_letters == 0
    # The operator dead-letters the failed event: the key's later events flow, in order,
    # each on its first attempt (waiting did not count as attempts).
    assert consumer.release_key(POISONED) is True
    consumer.run(stop_when_idle=True)
    assert log.seqs[POISONED] == [0, 2, 3, 4]
    assert log.attempts[POISONED] == [1, 1, 1, 1]
    (dead,) = transport.dead_letters()  # type: ignore[attr-defined]
    assert dead.attempts == 2
    assert dead.event.data["seq"] == 1
    assert transport.stats().messages == 0  # type: ignore[attr-defined]


def test_skip_dead_letters_and_moves_on(transport_factory: Make) -> None:
    transport, _publisher = _setup(transport_factory, "skip")
    log = _Log()
    consumer = PartitionConsumer(
        transport,  # type: ignore[arg-type]
        log.handler,
        tier=Ordered(),
        policy="skip",
        concurrency=4,
        retry=FAST_RETRY,
        idle_backoff=(0.01, 0.05),
    )
    consumer.run(stop_when_idle=True)
    for key in KEYS:
        assert log.seqs[key] == ([0, 2, 3, 4] if key == POISONED else [0, 1, 2, 3, 4])
    assert log.poison_calls == 2
    (dead,) = transport.dead_letters()  # type: ignore[attr-defined]
    assert dead.reason == exhausted_reason(2)  # the limit _setup opens the transport with
    assert transport.stats().messages == 0  # type: ignore[attr-defined]
