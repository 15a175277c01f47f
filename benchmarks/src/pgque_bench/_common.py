"""What every scenario shares: sizes, the SQL of the harness, queue names, percentiles."""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from pgque.core import Event
from pgque.core.named_sql import parse_named_sql
from pgque.core.validation import check_event


@dataclass(frozen=True)
class Sizes:
    """How big each scenario is: ``quick`` (CI, under 3 minutes) or the full run."""

    quick: bool
    drain_messages: int
    drain_groups: int
    workers: tuple[int, ...]
    peer_messages: int
    publish_messages: int
    latency_samples: int
    load_seconds: float
    fairness_hot: int
    fairness_cold: int
    scale_groups: tuple[int, ...]
    deep_group: int
    xmin_seconds: float
    batch: int = 32
    xmin_workers: int = 4
    claims_per_point: int = 200
    notes: list[str] = field(default_factory=list)

    @classmethod
    def build(cls, quick: bool) -> Sizes:
        """Return the sizes of a quick or a full run."""
        if quick:
            return cls(
                quick=True,
                drain_messages=4_000,
                drain_groups=1_000,
                workers=(1, 8),
                peer_messages=400,
                publish_messages=2_000,
                latency_samples=60,
                load_seconds=3.0,
                fairness_hot=10_000,
                fairness_cold=1_000,
                scale_groups=(1_000, 100_000),
                deep_group=0,
                xmin_seconds=8.0,
                claims_per_point=100,
            )
        return cls(
            quick=False,
            drain_messages=10_000,
            drain_groups=1_000,
            workers=(1, 4, 8, 16),
            peer_messages=1_000,
            publish_messages=10_000,
            latency_samples=300,
            load_seconds=8.0,
            fairness_hot=100_000,
            fairness_cold=1_000,
            scale_groups=(1_000, 100_000, 1_000_000),
            deep_group=1_000_000,
            xmin_seconds=60.0,
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
