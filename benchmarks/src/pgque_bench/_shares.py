"""The arithmetic of the tenant scenarios (issue 31): shares, deviations and rate windows.

Pure: the harness's own tests check it without a server (benchmarks/tests).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["key_counts", "rate_report", "share_table", "worst_burst"]


def share_table(
    counts: Mapping[str, int], weights: Mapping[str, float], groups: Mapping[str, int]
) -> dict[str, Any]:
    """Each key's share of the claims against its weight's share.

    *counts*: claims per key; *weights* and *groups*: each key's weight and number of groups.
    Returns ``{"claims": n, "keys": {key: {...}}, "max_deviation_pct": d}`` where each key has
    its weight, groups, claims, share, expected share and ``deviation_pct`` (the share's
    distance from the expected one, in percent of the expected share), and ``d`` is the
    largest distance in absolute value.
    """
    total = sum(counts.values())
    weight_sum = sum(weights.values())
    keys: dict[str, dict[str, float]] = {}
    for key, weight in weights.items():
        share = counts.get(key, 0) / total if total else 0.0
        expected = weight / weight_sum
        keys[key] = {
            "weight": weight,
            "groups": groups[key],
            "claims": counts.get(key, 0),
            "share": share,
            "expected": expected,
            "deviation_pct": 100.0 * (share / expected - 1.0),
        }
    worst = max((abs(row["deviation_pct"]) for row in keys.values()), default=0.0)
    return {"claims": total, "keys": keys, "max_deviation_pct": worst}


def worst_burst(times: Sequence[float], rate: float) -> float:
    """The most claims any window of *times* holds beyond what its length earns at *rate*:
    ``max over i <= j of (j - i + 1) - rate * (times[j] - times[i])``.

    A token bucket of burst *b* and this *rate* never lets it exceed *b* (up to the clocks'
    jitter between the store and the observer). *times* need not be sorted. O(n).
    """
    ordered = sorted(times)
    best = 0.0
    # (j + 1) - rate * t_j - min over i <= j of (i - rate * t_i)
    low = float("inf")
    for j, t in enumerate(ordered):
        low = min(low, j - rate * t)
        best = max(best, (j + 1 - rate * t) - low)
    return best


def rate_report(
    times: Mapping[str, Sequence[float]],
    limits: Mapping[str, tuple[float, float, int]],
    seconds: float,
) -> dict[str, Any]:
    """Each rate-limited key's handled rate against its limit over a run of *seconds*.

    *times*: each key's claim times; *limits*: each key's ``(rate, per, burst)``. The steady
    rate leaves out the first burst (the bucket starts full): ``(count - burst) / seconds``
    claims per ``per``. Returns per key: count, limit, steady rate, its deviation in percent
    of the limit, the burst and the worst window (:func:`worst_burst`); and the largest
    deviation and the largest excess of a window over the burst.
    """
    keys: dict[str, dict[str, float]] = {}
    for key, (rate, per, burst) in limits.items():
        stamps = list(times.get(key, []))
        limit = rate / per  # claims per second
        steady = max(0, len(stamps) - burst) / seconds
        keys[key] = {
            "count": len(stamps),
            "limit_per_s": limit,
            "steady_per_s": steady,
            "deviation_pct": 100.0 * (steady / limit - 1.0),
            "burst": burst,
            "worst_window": worst_burst(stamps, limit),
        }
    return {
        "keys": keys,
        "max_deviation_pct": max((abs(r["deviation_pct"]) for r in keys.values()), default=0.0),
        "max_excess": max((r["worst_window"] - r["burst"] for r in keys.values()), default=0.0),
    }


def key_counts(group_ids: Sequence[str]) -> Counter[str]:
    """Claims per key, the key being a group id's part before its first dot."""
    return Counter(g.split(".", 1)[0] for g in group_ids)
