"""As if pgque-postgres-async were not installed: put this folder first on PYTHONPATH of a
subprocess (as ``sitecustomize``, which the interpreter imports at start).

Its entry points are dropped from ``importlib.metadata.entry_points`` (a distribution that is
not installed registers none) and ``import pgque.postgres_async`` fails (ImportError).
"""

from __future__ import annotations

import importlib.metadata as metadata
import sys
from typing import Any

_entry_points = metadata.entry_points


def _without_async_postgres(**params: Any) -> Any:
    found: Any = _entry_points(**params)
    return metadata.EntryPoints(
        ep for ep in found if not str(ep.value).startswith("pgque.postgres_async")
    )


metadata.entry_points = _without_async_postgres
sys.modules["pgque.postgres_async"] = None  # type: ignore[assignment]
