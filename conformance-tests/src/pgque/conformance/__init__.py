"""pgque.conformance — the suite every pgque transport must pass, as an importable pytest suite.

A backend enables it with two fixtures in its ``conftest.py`` (``transport_factory`` and
``async_transport_factory``) and one star import per flavour in a test module; see the README of
the ``pgque-conformance`` distribution for the recipe.
"""

from __future__ import annotations

import pytest

# The suite lives in an installed package, not in test files, so pytest would not rewrite its
# asserts (no values in failure reports) unless told before the modules are imported.
pytest.register_assert_rewrite(
    "pgque.conformance.suite_sync",
    "pgque.conformance.suite_async",
    "pgque.conformance._concurrency_sync",
    "pgque.conformance._concurrency_async",
)

from pgque.conformance._types import AsyncTransportFactory, TransportFactory  # noqa: E402
from pgque.conformance.clock import FakeClock  # noqa: E402

__all__ = ["AsyncTransportFactory", "FakeClock", "TransportFactory"]
