"""The front door: the contract written once, over a backend's narrow driver.

:class:`Client` (blocking) and :class:`AsyncClient` (asyncio) are what every backend's
transport class is: they check arguments, fill in defaults, turn the conveniences into the
driver's primitives and trace publishes; a backend supplies a :class:`~pgque.core.Driver` or
:class:`~pgque.core.AsyncDriver` (docs/backends.md).
"""

from pgque.core.client._async import (
    AsyncBrowseClient,
    AsyncClient,
    AsyncFairnessClient,
    AsyncHistoryClient,
    AsyncOutboxClient,
    AsyncSettleInClient,
    AsyncStoreClient,
    AsyncWakeupsClient,
    AsyncWorkersClient,
)
from pgque.core.client._sync import (
    BrowseClient,
    Client,
    FairnessClient,
    HistoryClient,
    OutboxClient,
    SettleInClient,
    StoreClient,
    WakeupsClient,
    WorkersClient,
)

__all__ = [
    "AsyncBrowseClient",
    "BrowseClient",
    "AsyncClient",
    "AsyncFairnessClient",
    "AsyncHistoryClient",
    "AsyncOutboxClient",
    "AsyncSettleInClient",
    "AsyncStoreClient",
    "AsyncWakeupsClient",
    "AsyncWorkersClient",
    "Client",
    "FairnessClient",
    "HistoryClient",
    "OutboxClient",
    "SettleInClient",
    "StoreClient",
    "WakeupsClient",
    "WorkersClient",
]
