"""Fair shares between tenants (issue 31): the scenarios of the ``tenants`` section.

Each function runs inside one case process (see ``_case``) on one asyncio transport of a
system and returns the numbers the report shows. A group id is ``<key>.<n>``, so every lease
names its key. A system whose transport does not declare ``Capabilities.fairness`` answers
``{"unsupported": ...}`` for the scenarios that need keys (the report says so).

- :func:`shares`: every key backlogged, one consumer claiming ``claim_many(32)`` and
  acknowledging; each key's share of the claims against its weight's share (the *weights*
  and *key splitting* scenarios; ``keyed=False`` publishes the same groups without keys).
- :func:`noisy`: one big tenant's backlog over many groups, small tenants publishing at a
  steady rate, 8 worker slots with a fixed handler time; the small tenants' publish-to-start
  latency with keys, without keys, and on an otherwise idle queue.
- :func:`rates`: rate-limited keys beside an unlimited one, 8 slots claiming as fast as they
  can for a while; each limited key's steady rate and its worst window.
- :func:`cost`: ``claim_many(32)`` + ``ack_many`` with many keys and groups against the same
  queue without keys, in interleaved rounds in one process.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections.abc import Mapping
from typing import Any

from pgque.core import AsyncSupportsFairness, AsyncSupportsPurge, AsyncTransport, Event, Lease
from pgque_bench._common import fresh_queue, percentile
from pgque_bench._shares import key_counts, rate_report, share_table
from pgque_bench._systems import System, open_async

__all__ = ["cost", "noisy", "rates", "shares"]

_CHUNK = 1_000
_VISIBILITY = 60.0


def _event(sent: float = 0.0) -> Event:
    return Event(kind="bench", data={"t": sent})


async def _purge(transport: AsyncTransport) -> None:
    if isinstance(transport, AsyncSupportsPurge):
        await transport.purge()


def _unsupported(transport: AsyncTransport) -> dict[str, Any] | None:
    if transport.capabilities.fairness and isinstance(transport, AsyncSupportsFairness):
        return None
    return {"unsupported": "the transport does not declare Capabilities.fairness"}


async def _fill(
    transport: AsyncTransport, key: str, groups: int, messages: int, keyed: bool
) -> None:
    """Publish *messages* spread round-robin over *groups* groups ``<key>.<n>``."""
    items = [(f"{key}.{i % groups}", _event()) for i in range(messages)]
    for start in range(0, len(items), _CHUNK):
        await transport.publish_many(
            items[start : start + _CHUNK], fairness_key=key if keyed else None
        )


def _run(system: System, queue: str, body: Any) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        transport = open_async(system, queue, connections=9)
        try:
            result: dict[str, Any] = await body(transport)
            return result
        finally:
            try:
                await _purge(transport)
            finally:
                await transport.close()

    return asyncio.run(main())


# -- shares: weights and key splitting ---------------------------------------------------------


def shares(
    system: System,
    weights: Mapping[str, float],
    groups: Mapping[str, int],
    claims: int,
    batch: int = 32,
    keyed: bool = True,
) -> dict[str, Any]:
    """Claim *claims* messages (``claim_many(batch)`` + ``ack_many``) with every key of
    *weights* backlogged (its *groups* groups); each key's share against its weight's."""

    async def body(transport: AsyncTransport) -> dict[str, Any]:
        if keyed:
            if (refused := _unsupported(transport)) is not None:
                return refused
            assert isinstance(transport, AsyncSupportsFairness)
            for key, weight in weights.items():
                if weight != 1:
                    await transport.set_key_policy(key, weight=weight)
        total = sum(weights.values())
        for key, weight in weights.items():
            # Enough that the key stays backlogged through the run, whatever its share.
            need = math.ceil(claims * (weight / total if keyed else 1.0)) + 2 * batch
            await _fill(transport, key, groups[key], max(need, groups[key]), keyed)
        served: list[str] = []
        started = time.perf_counter()
        while len(served) < claims:
            leases = await transport.claim_many(batch, visibility=_VISIBILITY)
            if not leases:
                raise RuntimeError(f"the backlog ran out after {len(served)} claims")
            served += [lease.group_id for lease in leases]
            await transport.ack_many(leases)
        seconds = time.perf_counter() - started
        table = share_table(key_counts(served[:claims]), weights, groups)
        return {**table, "keyed": keyed, "seconds": seconds, "rate": claims / seconds}

    return _run(system, fresh_queue("tenants"), body)


# -- the noisy neighbour -------------------------------------------------------------------------


def noisy(
    system: System,
    mode: str,
    big_messages: int,
    big_groups: int,
    tenants: int,
    per_tenant: int,
    rate: float,
    slots: int = 8,
    handler_ms: float = 5.0,
    grace_s: float = 10.0,
    timeout_s: float = 120.0,
) -> dict[str, Any]:
    """The small tenants' publish-to-start latency beside one big tenant.

    *mode*: ``keys`` (every tenant its key), ``nokeys`` (the same messages without keys) or
    ``idle`` (the small tenants alone). The big tenant ``big`` has *big_messages* over
    *big_groups* groups, published first; *tenants* small tenants ``t<i>`` (tenant i has
    ``i % 10 + 1`` groups) publish *per_tenant* messages each, taking turns, *rate* messages
    per second in all. *slots* consumers claim one message each, hold it *handler_ms* (the
    handler), and acknowledge it.

    Without keys the small tenants' groups wait a round of the big tenant's groups each time,
    so their messages pile up: that mode stops *grace_s* after the last publish and counts a
    message that has not started by then at its wait so far (the figures are then lower
    bounds: ``unstarted`` says how many). The other modes fail unless every small message
    started within *timeout_s*.
    """

    async def body(transport: AsyncTransport) -> dict[str, Any]:
        keyed = mode == "keys"
        if keyed and (refused := _unsupported(transport)) is not None:
            return refused
        if mode != "idle":
            await _fill(transport, "big", big_groups, big_messages, keyed)
        expected = tenants * per_tenant
        latencies: list[float] = []
        sent: list[float] = []
        big_done = 0
        done = asyncio.Event()
        deadline = time.monotonic() + timeout_s

        async def slot() -> None:
            nonlocal big_done
            while not done.is_set() and time.monotonic() < deadline:
                lease = await transport.claim(visibility=_VISIBILITY)
                if lease is None:
                    await asyncio.sleep(0.002)
                    continue
                if lease.group_id.startswith("big."):
                    big_done += 1
                else:
                    latencies.append(_latency_ms(lease))
                    if len(latencies) >= expected:
                        done.set()
                await asyncio.sleep(handler_ms / 1000.0)
                await transport.ack(lease)

        async def publisher() -> None:
            interval = 1.0 / rate
            start = time.monotonic()
            for n in range(expected):
                tenant = n % tenants
                group = f"t{tenant}.{(n // tenants) % (tenant % 10 + 1)}"
                delay = start + n * interval - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                key = f"t{tenant}" if keyed else None
                sent.append(time.time())
                await transport.publish(group, _event(sent[-1]), fairness_key=key)
            if mode == "nokeys":
                await asyncio.sleep(grace_s)
                done.set()

        started = time.perf_counter()
        await asyncio.gather(publisher(), *(slot() for _ in range(slots)))
        seconds = time.perf_counter() - started
        unstarted = expected - len(latencies)
        if unstarted and mode != "nokeys":
            raise RuntimeError(f"{len(latencies)} of {expected} small messages started")
        # A group's messages start in publish order: the unstarted are the last of each group,
        # and each has waited at least until now.
        stopped = time.time()
        latencies += sorted((stopped - t) * 1000.0 for t in sent)[:unstarted]
        return {
            "mode": mode,
            "small_messages": expected,
            "unstarted": unstarted,
            "p50_ms": percentile(latencies, 50),
            "p99_ms": percentile(latencies, 99),
            "max_ms": max(latencies),
            "big_handled": big_done,
            "seconds": seconds,
        }

    return _run(system, fresh_queue("tenants"), body)


def _latency_ms(lease: Lease) -> float:
    data = lease.event.data
    sent = data.get("t") if isinstance(data, dict) else None
    return (time.time() - float(sent)) * 1000.0 if isinstance(sent, (int, float)) else math.nan


# -- rates -------------------------------------------------------------------------------------


def rates(
    system: System,
    limits: Mapping[str, tuple[float, float, int]],
    seconds: float,
    slots: int = 8,
    groups: int = 50,
) -> dict[str, Any]:
    """Claim as fast as *slots* consumers can for *seconds* while keys of *limits*
    (``key: (rate, per, burst)``) and an unlimited key ``free`` are backlogged; each limited
    key's steady rate and worst window (:func:`pgque_bench._shares.rate_report`), from the
    claims' times on the store's clock (each lease's expiry less its visibility)."""

    async def body(transport: AsyncTransport) -> dict[str, Any]:
        if (refused := _unsupported(transport)) is not None:
            return refused
        assert isinstance(transport, AsyncSupportsFairness)
        for key, (rate, per, burst) in limits.items():
            await transport.set_key_policy(key, rate=rate, per=per, burst=burst)
            budget = burst + math.ceil(rate / per * seconds * 1.5) + 10
            await _fill(transport, key, groups, budget, True)
        await _fill(transport, "free", groups, _CHUNK, True)
        times: dict[str, list[float]] = {key: [] for key in limits}
        free = 0
        start = time.monotonic()
        end = start + seconds

        async def slot() -> None:
            nonlocal free
            while time.monotonic() < end:
                lease = await transport.claim(visibility=_VISIBILITY)
                if lease is None:
                    await asyncio.sleep(0.001)
                    continue
                key = lease.group_id.split(".", 1)[0]
                if key in times:
                    # the claim's time on the store's clock, which the bucket runs on (the
                    # lease expires a visibility after it): a reply that reached this slot
                    # late, behind the other slots' replies, does not bunch the claims up
                    times[key].append(lease.expires_at - _VISIBILITY)
                else:
                    free += 1
                    # keep the unlimited key backlogged
                    await transport.publish(lease.group_id, _event(), fairness_key=key)
                await transport.ack(lease)

        await asyncio.gather(*(slot() for _ in range(slots)))
        report = rate_report(times, limits, seconds)
        return {**report, "seconds": seconds, "free_handled": free}

    return _run(system, fresh_queue("tenants"), body)


# -- cost --------------------------------------------------------------------------------------


def cost(
    system: System, keys: int, groups: int, rounds: int, batches: int, batch: int = 32
) -> dict[str, Any]:
    """``claim_many(batch)`` + ``ack_many`` on a queue of *groups* groups (one message each)
    under *keys* keys against the same queue without keys, *batches* calls per queue per
    round, the queues taken in turn (the order alternating by round); claims per second of
    each and the ratio of the medians."""

    async def body(keyed_t: AsyncTransport) -> dict[str, Any]:
        if (refused := _unsupported(keyed_t)) is not None:
            return refused
        plain_t = open_async(system, fresh_queue("tenants"), connections=1)
        try:
            plain = [(f"k{g % keys}.{g}", _event()) for g in range(groups)]
            for start in range(0, groups, _CHUNK):
                await plain_t.publish_many(plain[start : start + _CHUNK])
            for k in range(keys):  # one call per key: the key's groups k, k + keys, ...
                part = [(f"k{k}.{g}", _event()) for g in range(k, groups, keys)]
                for start in range(0, len(part), _CHUNK):
                    await keyed_t.publish_many(part[start : start + _CHUNK], fairness_key=f"k{k}")
            rates_of: dict[str, list[float]] = {"keys": [], "nokeys": []}
            for r in range(rounds):
                order = [("keys", keyed_t), ("nokeys", plain_t)]
                for name, transport in order if r % 2 == 0 else order[::-1]:
                    done = 0
                    started = time.perf_counter()
                    for _ in range(batches):
                        leases = await transport.claim_many(batch, visibility=_VISIBILITY)
                        done += len(leases)
                        await transport.ack_many(leases)
                    rates_of[name].append(done / (time.perf_counter() - started))
            keyed_median = statistics.median(rates_of["keys"])
            plain_median = statistics.median(rates_of["nokeys"])
            return {
                "keys": keys,
                "groups": groups,
                "rates": rates_of,
                "keys_per_s": keyed_median,
                "nokeys_per_s": plain_median,
                "ratio": keyed_median / plain_median,
            }
        finally:
            try:
                await _purge(plain_t)
            finally:
                await plain_t.close()

    return _run(system, fresh_queue("tenants"), body)
