"""Settling a lease in the caller's transaction (``settle_in``; docs/transactions.md): the
block's transaction, written once over a driver's connections (:class:`SettleIn` blocking,
:class:`AsyncSettleIn` asyncio), for a backend with ``Capabilities.settle_in``."""

from pgque.core.settle_in._async import AsyncSettleIn
from pgque.core.settle_in._sync import SettleIn

__all__ = ["AsyncSettleIn", "SettleIn"]
