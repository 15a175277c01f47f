"""Turn what the demo's workers recorded into verdicts on the queue's guarantees and numbers.

Each check is computed from observations only (never from the queue's own claims about
itself), so a broken backend fails the demo.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from pgque.core.cli._demo_types import HandledRecord, SettledRecord

__all__ = ["Check", "Analysis", "Workload", "analyse", "percentile"]


@dataclass(frozen=True)
class Check:
    """One guarantee: its name, whether it held, and what was observed."""

    name: str
    ok: bool | None  # None: measured but not checked
    detail: str


@dataclass
class Workload:
    """What the demo published: events per group, each group's priority, publish times."""

    counts: dict[str, int]
    priorities: dict[str, int]
    #: (group, seq) -> wall-clock seconds by which its publish had returned
    published_by: dict[tuple[str, int], float]
    publish_started_s: float = 0.0
    publish_finished_s: float = 0.0

    @property
    def total(self) -> int:
        """Return how many events were published."""
        return sum(self.counts.values())


@dataclass
class Analysis:
    """The verdicts and the numbers of one demo run."""

    checks: list[Check] = field(default_factory=list)
    metrics: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Return True when no check failed."""
        return all(check.ok is not False for check in self.checks)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Return the *q*-th percentile (0-100) of already sorted values, nearest-rank method."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _exactly_once(handled: Sequence[HandledRecord], workload: Workload) -> Check:
    seen = Counter((r[0], r[1]) for r in handled)
    expected = {(g, s) for g, n in workload.counts.items() for s in range(n)}
    missing = len(expected - seen.keys())
    unexpected = len(seen.keys() - expected)
    duplicates = sum(n - 1 for n in seen.values() if n > 1)
    ok = not (missing or unexpected or duplicates)
    detail = (
        f"{len(expected)} published, {len(seen)} handled; {missing} missing, "
        f"{duplicates} twice" + (f", {unexpected} unknown" if unexpected else "")
    )
    return Check("every event exactly once", ok, detail)


def _fifo(by_group: dict[str, list[HandledRecord]]) -> Check:
    violations = 0
    for records in by_group.values():
        seqs = [r[1] for r in sorted(records, key=lambda r: r[6])]
        violations += sum(1 for a, b in itertools.pairwise(seqs) if b < a)
    detail = f"{violations} out-of-order starts in {len(by_group)} groups"
    return Check("FIFO within each group", violations == 0, detail)


def _exclusive(by_group: dict[str, list[HandledRecord]]) -> Check:
    overlaps = 0
    closest_ns: int | None = None
    for records in by_group.values():
        ordered = sorted(records, key=lambda r: r[6])
        for prev, nxt in itertools.pairwise(ordered):
            gap = nxt[6] - prev[7]
            if gap < 0:
                overlaps += 1
            closest_ns = gap if closest_ns is None else min(closest_ns, gap)
    closest = "-" if closest_ns is None else f"{closest_ns / 1e6:.2f} ms"
    detail = f"{overlaps} overlaps; closest runs of a group {closest} apart"
    return Check("one worker per group", overlaps == 0, detail)


def _priorities(handled: Sequence[HandledRecord], workload: Workload) -> Check:
    wrong = sum(1 for r in handled if workload.priorities.get(r[0]) != r[4])
    return Check("priorities kept", wrong == 0, f"{wrong} leases with another priority")


def _fairness(
    by_group: dict[str, list[HandledRecord]],
    settled: dict[tuple[str, int], int],
    workload: Workload,
    slots: int,
    checkable: bool,
) -> Check:
    """Count the claims of other groups made while a ready group waited for its next turn.

    A group's wait starts when both its previous message was settled (ack returned) and its
    next message had been published, and ends at its next claim (server time). Round-robin
    serves every other group at most once in that window, so the count is at most
    ``groups - 1`` plus the claims already in flight (``slots``).
    """
    claims = sorted(r[5] for records in by_group.values() for r in records)
    worst = 0
    worst_group = "-"
    for group, records in by_group.items():
        ordered = sorted(records, key=lambda r: r[5])
        for prev, nxt in itertools.pairwise(ordered):
            settled_ns = settled.get((group, prev[2]))
            if settled_ns is None:
                continue
            start = max(settled_ns / 1e9, workload.published_by.get((group, nxt[1]), 0.0))
            end = nxt[5]
            if end <= start:
                continue
            waited = bisect.bisect_left(claims, end) - bisect.bisect_right(claims, start)
            if waited > worst:
                worst, worst_group = waited, group
    groups = len(workload.counts)
    bound = groups - 1 + slots
    detail = (
        f"a ready group waited <= {worst} claims of others ({worst_group}); "
        f"bound {bound} = groups - 1 + {slots} slots"
    )
    if not checkable:
        return Check("round-robin fairness", None, detail + "; not checked: remote server clock")
    return Check("round-robin fairness", worst <= bound, detail)


def analyse(
    handled: Sequence[HandledRecord],
    settled_records: Sequence[SettledRecord],
    workload: Workload,
    *,
    slots: int,
    fairness_checkable: bool,
) -> Analysis:
    """Check the guarantees and compute throughput and latency from the workers' records."""
    analysis = Analysis()
    by_group: dict[str, list[HandledRecord]] = defaultdict(list)
    for record in handled:
        by_group[record[0]].append(record)
    settled: dict[tuple[str, int], int] = {}
    outcomes: Counter[str] = Counter()
    for group, message_id, outcome, when_ns in settled_records:
        outcomes[outcome] += 1
        if outcome == "acked":
            settled[(group, message_id)] = when_ns
    analysis.checks += [
        _exactly_once(handled, workload),
        _fifo(by_group),
        _exclusive(by_group),
        _fairness(by_group, settled, workload, slots, fairness_checkable),
        _priorities(handled, workload),
    ]
    redelivered = sum(1 for r in handled if r[3] > 1)
    not_acked = sum(n for outcome, n in outcomes.items() if outcome != "acked")
    analysis.checks.append(
        Check(
            "no redelivery",
            redelivered == 0 and not_acked == 0,
            f"{redelivered} redelivered; "
            + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())),
        )
    )

    latencies = sorted(max(0.0, r[8] / 1e9 - r[9]) for r in handled)
    if settled and workload.publish_finished_s > workload.publish_started_s:
        last = max(settled.values()) / 1e9
        elapsed = max(last - workload.publish_started_s, 1e-9)
        publish_s = workload.publish_finished_s - workload.publish_started_s
        analysis.metrics += [
            ("events", f"{workload.total:,} in {len(workload.counts)} groups"),
            ("publish rate", f"{workload.total / publish_s:,.0f} events/s (publish_many)"),
            ("throughput", f"{len(settled) / elapsed:,.0f} events/s handled"),
            ("wall time", f"{elapsed:.2f} s, first publish to last ack"),
        ]
    if latencies:
        analysis.metrics += [
            (
                "publish→handle",
                "p50 {} · p95 {} · p99 {} · max {}".format(
                    *(_ms(percentile(latencies, q)) for q in (50, 95, 99, 100))
                ),
            ),
        ]
    return analysis
