"""As if pgque-dashboard were not installed: put this folder first on PYTHONPATH of a
subprocess (as ``sitecustomize``, which the interpreter imports at start).

Its entry points (``pgque dashboard``, ``pgque metrics``, the worker's Prometheus exporter)
are dropped from ``importlib.metadata.entry_points`` (a distribution that is not installed
registers none) and ``import pgque.dashboard`` fails (ImportError).
"""

from __future__ import annotations

import importlib.metadata as metadata
import sys
from typing import Any

_entry_points = metadata.entry_points


def _without_dashboard(**params: Any) -> Any:
    found: Any = _entry_points(**params)
    return metadata.EntryPoints(
        ep for ep in found if not str(ep.value).startswith("pgque.dashboard")
    )


metadata.entry_points = _without_dashboard
sys.modules["pgque.dashboard"] = None  # type: ignore[assignment]
