"""The stress run's checker: it passes an honest transport and catches seeded bugs."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from pgque.conformance.stress import StressReport, _Removal, run_stress
from pgque.core import Event, InMemoryTransport, Lease


class _Memory(InMemoryTransport):
    """The reference transport plus the purge a stress run's scratch queue needs."""

    def purge(self) -> None:
        while leases := self.claim_many(100, 30.0):
            self.ack_many(leases)
        for letter in self.dead_letters(limit=10_000):
            self.redrive([letter.id])
        while leases := self.claim_many(100, 30.0):
            self.ack_many(leases)


class _LosesOnePublish(_Memory):
    """Seeded bug: the 50th publish returns an id but stores nothing."""

    count = 0

    def publish(
        self,
        group_id: str,
        event: Event,
        *,
        priority: int = 0,
        delay: float = 0.0,
        fairness_key: str | None = None,
    ) -> int:
        self.count += 1
        if self.count == 50:
            return 10**9
        return super().publish(
            group_id, event, priority=priority, delay=delay, fairness_key=fairness_key
        )


class _AcksTwice(_Memory):
    """Seeded bug: an ack of a redelivered message also reports the message acked earlier."""

    def ack_many(self, leases: Iterable[Lease]) -> list[bool]:
        leases = list(leases)
        results = super().ack_many(leases)
        for lease, ok in zip(leases, results, strict=True):
            if ok and lease.attempt > 1:
                super().publish(lease.group_id, lease.event)  # delivered again later
        return results


def _run(transport: InMemoryTransport) -> StressReport:
    return run_stress(transport, _Memory(queue="scratch"), threads=4, seconds=1.5, seed=7)


def test_an_honest_transport_passes() -> None:
    report = _run(_Memory(queue="main", max_attempts=5, on_exhausted="block"))
    report.check()
    assert report.ops["claim"] > 50
    assert len(report.committed) > 50


def test_a_lost_publish_is_caught() -> None:
    report = _run(_LosesOnePublish(queue="main", max_attempts=5, on_exhausted="block"))
    with pytest.raises(AssertionError, match="acked 0 times"):
        report.check()


def test_a_message_delivered_twice_is_caught() -> None:
    report = _run(_AcksTwice(queue="main", max_attempts=5, on_exhausted="block"))
    with pytest.raises(AssertionError, match=r"acked [2-9] times"):
        report.check()


def test_a_claim_that_overtakes_a_queued_message_is_caught() -> None:
    report = StressReport()
    report.claims.append(("g", 2, 10.0))  # message 2 leased, claim ended at t=10
    report.removals["g"].append(_Removal(1, 11.0))  # message 1 removed only from t=11
    with pytest.raises(AssertionError, match="message 2 leased while an earlier"):
        report.check()
    ordered = StressReport()
    ordered.claims.append(("g", 2, 10.0))
    ordered.removals["g"].append(_Removal(1, 9.0))
    ordered.check()


def test_leftovers_and_operation_errors_are_caught() -> None:
    report = StressReport()
    report.final_stats["q"] = (1, 0)
    report.failures.append("ack: Traceback ...\nRetryableConflict: deadlock detected")
    with pytest.raises(AssertionError) as info:
        report.check()
    assert "phantom group" in str(info.value)
    assert "RetryableConflict" in str(info.value)
