"""PLACEHOLDER"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import redis

from pgque.core import Event
from pgque.redis import RedisTransport


class SteppingClock:
    """An injected clock that moves *step* seconds at every reading: each script call of one
    transport method sees a later time than the one before."""

    def __init__(self, start: float = 1_800_000_000.0, step: float = 10.0) -> None:
        self._times = itertools.count()
        self._start, self._step = start, step

    def __call__(self) -> float:
        return self._start + next(self._times) * self._step


def test_claim_rounds_never_return_two_leases_of_one_group(
    make_transport: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    """claim_many claims again for the places undecodable heads took; if the first round's
    leases have expired by the next round (a short visibility), a group must not come back a
    second time in the same answer: the earlier lease is fenced out, only the later is held."""
    transport = make_transport(clock=SteppingClock())
    transport.publish("a", Event(kind="a"))
    bad = transport.publish("b", Event(kind="b"))
    raw_client.hset(transport.key_prefix + "msg", str(bad), b"{not json")
    leases = transport.claim_many(5, visibility=5.0)  # each later script call is 10 s later
    groups = [lease.group_id for lease in leases]
    assert groups == ["a"]
    assert transport.ack(leases[0])  # the one lease returned is the one held
