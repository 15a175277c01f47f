"""The fixtures every conformance test uses: the harness, the transport, known gaps."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import pytest
import pytest_asyncio  # async-only

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance._types import AsyncTransportFactory
from pgque.core import AsyncTransport

# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture
def harness(async_transport_factory: AsyncTransportFactory) -> AsyncHarness:
    """Return the test's harness: its transports share one clock."""
    return AsyncHarness(async_transport_factory)


@pytest_asyncio.fixture
async def atransport(harness: AsyncHarness) -> AsyncTransport:
    """Return the test's transport on a fresh, empty queue."""
    return await harness.open()


@pytest.fixture(autouse=True)
def pgque_conformance_known_gaps(request: pytest.FixtureRequest) -> None:
    """Turn a backend's declared known gaps into strict xfails.

    A backend may define a fixture ``conformance_known_gaps`` returning ``{test name: reason}``;
    those tests are expected to fail, and fail the run once they pass.
    """
    try:
        gaps: dict[str, str] = request.getfixturevalue("conformance_known_gaps")
    except pytest.FixtureLookupError:
        return
    node = request.node
    for name in (node.name, getattr(node, "originalname", node.name)):
        if name in gaps:
            request.applymarker(pytest.mark.xfail(reason=gaps[name], strict=True))
            return


__all__ = ["harness", "atransport", "pgque_conformance_known_gaps"]
