"""What every scenario shares: sizes, the SQL of the harness, queue names, statistics."""

from __future__ import annotations

import math
import statistics
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pgque.core import Event
from pgque.core.validation import check_event


@dataclass(frozen=True)
class Sizes:
    """How big each scenario is: ``quick`` (CI, under 4 minutes) or the full run (~15 minutes).

    Every system of a drain or worker case drains the same backlog: *drain_groups* groups of
    *per_group* messages each.
    """

    quick: bool
    drain_groups: int
    per_group: int
    #: the backlog of the user-level scenario (Worker, PgQueuer, procrastinate with lock=):
    #: smaller, as procrastinate's per-lock fetch runs at tens of jobs per second here
    users_groups: int
    users_per_group: int
    rounds: int
    publish_messages: int
    latency_samples: int
    load_seconds: float
    fairness_hot: int
    fairness_cold: int
    scale_groups: tuple[int, ...]
    deep_group: int
    xmin_seconds: float
    #: the tenants section (issue 31): claims of the shares scenarios, groups of each key (at
    #: least a batch's worth: a group gives one message per claim_many, so a key with fewer
    #: groups than its share of a batch could not take its share)
    tenant_claims: int = 10_000
    tenant_groups: int = 50
    #: the noisy neighbour: the big tenant's messages and groups; each small tenant's
    #: messages (10 small tenants) and their publish rate (messages per second in all)
    noisy_big: int = 100_000
    noisy_big_groups: int = 10_000
    noisy_per_tenant: int = 100
    noisy_rate: float = 50.0
    #: seconds the noisy neighbour without keys runs on after the last publish
    noisy_grace: float = 10.0
    #: seconds of the rates scenario
    rate_seconds: float = 60.0
    #: the cost scenario: keys, groups (one message each), rounds, claim_many calls a round
    cost_keys: int = 10_000
    cost_groups: int = 1_000_000
    cost_rounds: int = 5
    cost_batches: int = 50
    #: claim_many size of the batched transport cases
    batch: int = 32
    #: tasks or processes of the transport cases
    tasks: int = 4
    #: concurrency of the worker cases (beside each worker's default)
    concurrency: int = 8
    publish_batch: int = 1_000
    xmin_workers: int = 4
    claims_per_point: int = 200
    #: job history's prune scenario (issue 33): past days dropped one at a time while claims
    #: run, the records of each day, the backlog drained meanwhile, seconds between prunes
    prune_days: int = 6
    prune_rows: int = 1_000_000
    prune_messages: int = 200_000
    prune_pause: float = 1.0
    #: the dashboard section (issue 33): groups and job-history records of the queue its pages
    #: are timed over, requests per page (after a warm-up), and the case's time limit (the
    #: fill writes every record)
    dashboard_groups: int = 1_000_000
    dashboard_history: int = 10_000_000
    dashboard_requests: int = 20
    dashboard_timeout: float = 2400.0
    #: the slots section (issue 34): worker slots at each point, and the backlog each point
    #: drains (every system the same)
    slot_points: tuple[int, ...] = (1, 4, 16, 64)
    slots_groups: int = 250
    slots_per_group: int = 20
    #: the most connections a pgque worker's pool (or procrastinate's) holds in the slots and
    #: I/O cases: one per slot and a spare up to this (handlers hold no connection)
    pool_cap: int = 17
    #: the I/O-bound handlers: slots, seconds each handler awaits, and the backlog
    io_slots: int = 200
    io_sleep: float = 0.01
    io_groups: int = 4_000
    io_per_group: int = 10
    #: stats() on a big queue (issue 33): groups (one message each), how many of them are
    #: leased, parked (of the leased) and paused, and the stats() calls timed
    stats_groups: int = 1_000_000
    stats_leased: int = 100_000
    stats_parked: int = 1_000
    stats_paused: int = 1_000
    stats_calls: int = 200
    #: seconds one case may run before it is recorded as an error
    case_timeout: float = 600.0
    #: the same for the cost scenario, which first publishes its groups twice (with keys and
    #: without: 2,000,000 messages at full size)
    cost_timeout: float = 2400.0

    @property
    def drain_messages(self) -> int:
        """The backlog every drain and worker case drains."""
        return self.drain_groups * self.per_group

    @property
    def users_messages(self) -> int:
        """The backlog every case of the user-level scenario drains."""
        return self.users_groups * self.users_per_group

    @classmethod
    def build(cls, quick: bool) -> Sizes:
        """Return the sizes of a quick or a full run."""
        if quick:
            return cls(
                quick=True,
                drain_groups=200,
                per_group=10,
                users_groups=20,
                users_per_group=10,
                rounds=2,
                publish_messages=2_000,
                latency_samples=60,
                load_seconds=3.0,
                fairness_hot=5_000,
                fairness_cold=500,
                scale_groups=(1_000, 20_000),
                deep_group=0,
                xmin_seconds=5.0,
                claims_per_point=100,
                case_timeout=180.0,
                cost_timeout=180.0,
                stats_groups=20_000,
                stats_leased=2_000,
                stats_parked=100,
                stats_paused=100,
                stats_calls=50,
                prune_days=3,
                prune_rows=20_000,
                prune_messages=40_000,
                prune_pause=0.5,
                dashboard_groups=20_000,
                dashboard_history=100_000,
                dashboard_requests=10,
                dashboard_timeout=180.0,
                tenant_claims=2_000,
                tenant_groups=40,
                noisy_big=20_000,
                noisy_big_groups=2_000,
                noisy_per_tenant=20,
                noisy_rate=50.0,
                noisy_grace=2.0,
                rate_seconds=6.0,
                cost_keys=500,
                cost_groups=50_000,
                cost_rounds=3,
                cost_batches=20,
                slots_groups=100,
                slots_per_group=10,
                io_groups=1_000,
                io_per_group=5,
            )
        return cls(
            quick=False,
            drain_groups=500,
            per_group=20,
            users_groups=50,
            users_per_group=20,
            rounds=3,
            publish_messages=10_000,
            latency_samples=150,
            load_seconds=6.0,
            fairness_hot=20_000,
            fairness_cold=1_000,
            scale_groups=(1_000, 100_000),
            deep_group=100_000,
            xmin_seconds=20.0,
        )


def repo_root() -> Path:
    """Return the repository root (the folder holding ``shared-sql/``).

    Raises FileNotFoundError when the harness runs outside a checkout.
    """
    for parent in Path(__file__).resolve().parents:
        if (parent / "shared-sql" / "bench.sql").is_file():
            return parent
    raise FileNotFoundError("shared-sql/bench.sql not found: run the benchmark from a checkout")


@cache
def bench_sql() -> dict[str, str]:
    """Return the named statements of ``shared-sql/bench.sql``."""
    # Imported here: only the PostgreSQL cases read it, and the harness runs without them.
    from pgque.postgres.named_sql import parse_named_sql

    text = (repo_root() / "shared-sql" / "bench.sql").read_text(encoding="utf-8")
    return parse_named_sql(text)


def pgbench_script(name: str) -> Path:
    """Return the path of one pgbench script of ``shared-sql/pgbench/``."""
    return repo_root() / "shared-sql" / "pgbench" / f"{name}.sql"


def fresh_queue(prefix: str = "bench") -> str:
    """Return a new queue name, unique to this run."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def group_of(index: int, groups: int) -> str:
    """Return the group of message *index* when messages are dealt over *groups* groups."""
    return f"g{index % groups:05d}"


def bench_event() -> Event:
    """Return the small event every scenario publishes."""
    return Event(kind="bench", data={"n": 1})


def event_text() -> str:
    """Return :func:`bench_event` as the JSON text pgque stores."""
    return check_event(bench_event())


def percentile(values: Sequence[float], q: float) -> float | None:
    """Return the *q*-th percentile (0-100, nearest rank) of *values*, None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def summarise(values: Sequence[float]) -> dict[str, float | int | None]:
    """Return the median, lowest, highest and spread of one case's rounds.

    ``spread`` is ``(max - min) / median`` (0.25: the rounds span a quarter of the median);
    every field is None when *values* is empty.
    """
    if not values:
        return {"median": None, "min": None, "max": None, "spread": None, "rounds": 0}
    mid = statistics.median(values)
    low, high = min(values), max(values)
    return {
        "median": mid,
        "min": low,
        "max": high,
        "spread": (high - low) / mid if mid else None,
        "rounds": len(values),
    }


def rotated(items: Sequence[str], round_index: int) -> list[str]:
    """Return *items* rotated left by *round_index*: round 0 keeps the order, round 1 starts
    at the second item, and so on, so no case always runs first (or last) on a warm server."""
    if not items:
        return []
    shift = round_index % len(items)
    return [*items[shift:], *items[:shift]]
