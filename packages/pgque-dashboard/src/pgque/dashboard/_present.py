"""What the pages show, computed apart from the templates: links, times, the chart."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote, urlencode

from pgque.core.explain import age_text, clock_text, relative_text
from pgque.dashboard._source import Sample

__all__ = [
    "Chart",
    "chart",
    "group_path",
    "page_query",
    "when",
    "iso",
    "due",
    "age",
    "pretty_json",
]


def group_path(queue: str, group_id: str) -> str:
    """Return the path of *group_id*'s page under the app's root (its id percent-encoded).

    The id is one path segment (``/`` is ``%2F``), read back whole by the ``path`` converter.
    An id that is only dots would be a dot segment, which browsers fold away: such ids use the
    ``?id=`` form of the same page.
    """
    if group_id.strip(".") == "":
        return f"/queues/{queue}/group?{urlencode({'id': group_id})}"
    return f"/queues/{queue}/groups/{quote(group_id, safe='')}"


def page_query(**params: object) -> str:
    """Return ``?a=1&b=2`` of the given parameters that are not None or empty."""
    kept = {k: str(v) for k, v in params.items() if v is not None and v != ""}
    return "?" + urlencode(kept) if kept else ""


def when(epoch: float | None, now: float) -> str:
    """``12:03:07 UTC (in 4.0 s)``, or ``-``."""
    if epoch is None:
        return "-"
    return f"{clock_text(epoch, now)} ({relative_text(epoch, now)})"


def iso(epoch: float) -> str:
    """*epoch* as ISO 8601 in UTC, to the second: ``2033-05-18T03:34:20Z``."""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def due(epoch: float | None, now: float) -> str:
    """``2033-05-18T03:34:20Z (in 4.0 s)``, or ``-``."""
    if epoch is None:
        return "-"
    return f"{iso(epoch)} ({relative_text(epoch, now)})"


def age(epoch: float | None, now: float) -> str:
    """How long ago *epoch* was (``41.0 s``), or ``-``."""
    if epoch is None:
        return "-"
    return age_text(max(now - epoch, 0.0))


def pretty_json(value: Any) -> str:
    """*value* as indented JSON text (shown escaped, in a ``<pre>``)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


#: The chart's size in SVG user units.
CHART_W = 160
CHART_H = 32


@dataclass(frozen=True)
class Chart:
    """A throughput sparkline: SVG polyline points, the latest rate and a caption."""

    points: str
    latest: float | None
    peak: float
    caption: str


def chart(samples: list[Sample]) -> Chart:
    """Return the throughput chart of *samples*: messages leaving the queue per second.

    Between two samples the rate is the drop of the stored-message count over the time between
    them (0 when the count grew): a net figure, since publishes in the same interval offset
    consumption. Raises nothing.
    """
    rates: list[tuple[float, float]] = []
    for before, after in itertools.pairwise(samples):
        seconds = after.at - before.at
        if seconds <= 0:
            continue
        rates.append((after.at, max(before.messages - after.messages, 0) / seconds))
    if not rates:
        return Chart("", None, 0.0, "collecting samples")
    start, end = rates[0][0], rates[-1][0]
    span = max(end - start, 1e-9)
    peak = max(rate for _, rate in rates)
    scale = peak if peak > 0 else 1.0
    points = []
    for at, rate in rates:
        x = 0.0 if len(rates) == 1 else (at - start) / span * CHART_W
        y = CHART_H - 1 - rate / scale * (CHART_H - 2)
        points.append(f"{x:.1f},{y:.1f}")
    if len(points) == 1:
        points.append(f"{CHART_W:.1f},{points[0].split(',')[1]}")
    minutes = (samples[-1].at - samples[0].at) / 60
    caption = f"last {minutes:.1f} min, peak {peak:.1f} msg/s"
    return Chart(" ".join(points), rates[-1][1], peak, caption)
