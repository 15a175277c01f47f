"""Fixtures of the dashboard's route tests (Starlette's TestClient over in-memory queues)."""

from __future__ import annotations

import pytest
from _dash_helpers import Scene


@pytest.fixture
def scene() -> Scene:
    """A fresh in-memory store."""
    return Scene()
