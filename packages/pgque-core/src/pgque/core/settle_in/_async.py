"""Settle a lease in the caller's transaction: ``settle_in`` (docs/transactions.md), written once
over an :class:`~pgque.core.driver.AsyncSettleInDriver` (asyncio API).

The transaction first extends the lease on the caller's connection, which holds the group
until the transaction ends (PostgreSQL locks the group's row: claims skip locked rows). Lock
order: the block's own writes come after the group, and the settlement's rows are taken by the
same calls as any settlement, in their order.
"""

# This file is the source of its blocking twin, _sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import time
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Generic, TypeVar

from pgque.core.contract import ErrorLike
from pgque.core.driver import AsyncSettleInDriver
from pgque.core.errors import InvalidInput, LeaseLost
from pgque.core.models import Lease, Settlement
from pgque.core.validation import CheckedSettlement

__all__ = ["AsyncSettleIn"]

#: The type of the store's connections.
C = TypeVar("C")


class AsyncSettleIn(Generic[C]):
    """The context manager ``settle_in`` returns, and the transaction it yields: *C* is the
    type of the store's connections."""

    def __init__(
        self,
        driver: AsyncSettleInDriver[C],
        lease: Lease,
        connection: object,
        check: Any,
        now: Any,
    ) -> None:
        self._driver = driver
        self._lease = lease
        self._given = connection
        #: the front door's settlement checks: list[Settlement], now -> list[CheckedSettlement]
        self._check = check
        #: the injected clock, or None for the server's
        self._now = now
        self._borrowed: AbstractAsyncContextManager[C] | None = None
        self._connection: C | None = None
        self._transaction: AbstractAsyncContextManager[Any] | None = None
        self._settled = False

    @property
    def connection(self) -> C:
        """The connection the transaction is on: write your effects on it."""
        if self._connection is None:
            raise InvalidInput("the settle_in block is not open")
        return self._connection

    async def __aenter__(self) -> AsyncSettleIn[C]:
        if self._connection is not None:
            raise InvalidInput("a settle_in block is entered once")
        if self._given is None:
            self._borrowed = self._driver.connection()
            self._connection = await self._borrowed.__aenter__()
        else:
            self._connection = await self._driver.caller_connection(self._given)
        try:
            transaction = self._driver.transaction(self._connection)
            self._transaction = transaction
            await transaction.__aenter__()
            remaining = max(self._lease.expires_at - self._time(), 0.0)
            until = await self._driver.hold_on(
                self._connection, self._lease, remaining, self._now()
            )
            if until is None:
                raise LeaseLost(
                    f"lease of message {self._lease.message_id} in group "
                    f"{self._lease.group_id!r} is no longer the group's: nothing was written"
                )
        except BaseException as exc:
            await self._end(type(exc), exc, exc.__traceback__)
            raise
        self._driver.held.open(self._lease.token)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        committed = False
        try:
            if exc_type is None and not self._settled:
                await self._apply(Settlement(lease=self._lease, outcome="ack"))
            await self._end(exc_type, exc, tb)
            committed = exc_type is None
        except BaseException:
            committed = False
            await self._end_quietly()
            raise
        finally:
            self._driver.held.close(self._lease.token, committed=committed)

    async def nack(self, *, delay: float = 0.0, error: ErrorLike | None = None) -> None:
        """See :meth:`~pgque.core.SettleTransaction.nack`."""
        await self._apply(Settlement(lease=self._lease, outcome="nack", delay=delay, error=error))

    async def dead_letter(self, reason: str, *, error: ErrorLike | None = None) -> None:
        """See :meth:`~pgque.core.SettleTransaction.dead_letter`."""
        await self._apply(Settlement.dead_letter(self._lease, reason, error=error))

    async def release(self) -> None:
        """See :meth:`~pgque.core.SettleTransaction.release`."""
        await self._apply(Settlement(lease=self._lease, outcome="release"))

    async def _apply(self, settlement: Settlement) -> None:
        if self._settled:
            raise InvalidInput("the lease is settled once in a settle_in block")
        if self._connection is None:
            raise InvalidInput("the settle_in block is not open")
        checked: list[CheckedSettlement] = self._check([settlement], self._now())
        if not await self._driver.settle_on(self._connection, checked[0], self._now()):
            # The group row is locked by this transaction since its start: unreachable unless
            # the lease was settled on this connection by other means.
            raise LeaseLost(f"lease of message {self._lease.message_id} was settled already")
        self._settled = True

    def _time(self) -> float:
        injected = self._now()
        return time.time() if injected is None else float(injected)

    async def _end(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """End the transaction (commit, or roll back on an exception), then give back a
        borrowed connection."""
        try:
            if self._transaction is not None:
                transaction, self._transaction = self._transaction, None
                await transaction.__aexit__(exc_type, exc, tb)
        finally:
            if self._borrowed is not None:
                borrowed, self._borrowed = self._borrowed, None
                await borrowed.__aexit__(exc_type, exc, tb)

    async def _end_quietly(self) -> None:
        try:
            failed = InvalidInput("settle_in failed")
            await self._end(InvalidInput, failed, None)
        except Exception:  # the first failure is the one raised
            return
