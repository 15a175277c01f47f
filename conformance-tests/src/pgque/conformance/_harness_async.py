"""The per-test harness of the asyncio suite: opens transports and moves time."""

# The source of its blocking twin, _harness_sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import pytest

from pgque.conformance._types import AsyncTransportFactory
from pgque.conformance.clock import FakeClock
from pgque.core import AsyncTransport, Capabilities

__all__ = ["AsyncHarness", "REAL_UNIT_ENV"]

#: Seconds one time unit lasts when the transport has no injected clock (tests sleep for real).
REAL_UNIT_ENV = "PGQUE_CONFORMANCE_REAL_UNIT"

#: With a fake clock time costs nothing, so a unit is long enough to dwarf any rounding.
_FAKE_UNIT = 10.0


class AsyncHarness:
    """Open transports for one test on one clock, and move that clock.

    When the transport declares ``injected_clock``, every transport of the test shares one
    :class:`FakeClock` and :meth:`advance` moves it; otherwise :meth:`advance` sleeps for real
    and :attr:`unit` is short (``PGQUE_CONFORMANCE_REAL_UNIT`` seconds, default 0.4).
    """

    def __init__(self, factory: AsyncTransportFactory) -> None:
        self._factory = factory
        self.clock = FakeClock()
        self._capabilities: Capabilities | None = None

    @property
    def capabilities(self) -> Capabilities:
        """The capabilities of the test's transport; raises RuntimeError before :meth:`open`."""
        if self._capabilities is None:
            raise RuntimeError("open() the test's transport first")
        return self._capabilities

    @property
    def fake_time(self) -> bool:
        """Whether time is the shared fake clock (the transport honours ``clock=``)."""
        return self.capabilities.injected_clock

    @property
    def unit(self) -> float:
        """A time unit in seconds: visibilities and delays in tests are small multiples of it."""
        if self.fake_time:
            return _FAKE_UNIT
        return float(os.environ.get(REAL_UNIT_ENV, "0.4"))

    async def open(self) -> AsyncTransport:
        """Open the test's transport on a fresh queue and learn its capabilities."""
        transport = await self._factory(clock=self.clock)
        self._capabilities = transport.capabilities
        return transport

    async def make(self, **options: Any) -> AsyncTransport:
        """Open another transport (``queue=`` for a second worker), on the test's clock."""
        if self.fake_time:
            options.setdefault("clock", self.clock)
        return await self._factory(**options)

    def now(self) -> float:
        """Return the time the transports see (fake clock or the local wall clock)."""
        return self.clock() if self.fake_time else time.time()

    async def advance(self, seconds: float) -> None:
        """Let *seconds* pass: move the fake clock, or sleep."""
        if self.fake_time:
            self.clock.advance(seconds)
        else:
            await asyncio.sleep(seconds)

    def require(self, flag: str) -> None:
        """Skip the test unless the transport declares capability *flag*."""
        if not getattr(self.capabilities, flag):
            pytest.skip(f"the transport does not declare capability {flag!r}")
