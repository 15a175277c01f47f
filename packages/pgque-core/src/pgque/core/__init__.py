"""pgque.core — the contract of pgque and its in-memory reference transport.

Import everything a user needs from here::

    from pgque.core import Event, connect
"""

from __future__ import annotations

from pgque.core.client import (
    AsyncClient,
    AsyncStoreClient,
    AsyncWakeupsClient,
    Client,
    StoreClient,
    WakeupsClient,
)
from pgque.core.contract import (
    AsyncSupportsPurge,
    AsyncSupportsQueues,
    AsyncSupportsServerTime,
    AsyncSupportsWakeups,
    AsyncTransport,
    ErrorLike,
    SupportsPurge,
    SupportsQueues,
    SupportsServerTime,
    SupportsWakeups,
    Transport,
)
from pgque.core.driver import (
    AsyncDriver,
    AsyncStoreDriver,
    AsyncWakeupsDriver,
    ClaimRequest,
    Driver,
    GroupCommand,
    Publication,
    StoreDriver,
    WakeupsDriver,
)
from pgque.core.errors import (
    ConfigurationError,
    ConnectionLost,
    InvalidInput,
    PartialFailure,
    PartlySettled,
    PgqueError,
    QueueMoving,
    RetryableConflict,
    SchemaMismatch,
    TransportClosed,
)
from pgque.core.memory import AsyncInMemoryTransport, InMemoryTransport, MemoryStore
from pgque.core.models import (
    Capabilities,
    DeadLetter,
    ErrorInfo,
    Event,
    GroupInfo,
    GroupStateName,
    Lease,
    QueueStats,
    ScheduledMessage,
    Settlement,
    SettleOutcome,
    SettleResult,
)
from pgque.core.queue_model import QueueModel
from pgque.core.registry import Backend, connect, connect_async
from pgque.core.routing import Router
from pgque.core.scheduling import (
    AsyncScheduler,
    PublishedTick,
    Schedule,
    ScheduleEntry,
    Scheduler,
)
from pgque.core.settings import Settings
from pgque.core.urls import mask_url
from pgque.core.validation import OnExhausted, TransportOptions
from pgque.core.worker import (
    AsyncWorker,
    CompositeHooks,
    MetricsHooks,
    Outcome,
    Reject,
    Retry,
    RetryPolicy,
    Worker,
    WorkerHooks,
    WorkerReport,
)

__all__ = [
    "AsyncClient",
    "AsyncStoreClient",
    "AsyncWakeupsClient",
    "Client",
    "StoreClient",
    "WakeupsClient",
    "AsyncDriver",
    "AsyncStoreDriver",
    "AsyncWakeupsDriver",
    "ClaimRequest",
    "Driver",
    "GroupCommand",
    "Publication",
    "StoreDriver",
    "WakeupsDriver",
    "Transport",
    "AsyncTransport",
    "SupportsWakeups",
    "AsyncSupportsWakeups",
    "SupportsServerTime",
    "AsyncSupportsServerTime",
    "SupportsPurge",
    "AsyncSupportsPurge",
    "SupportsQueues",
    "AsyncSupportsQueues",
    "Event",
    "Lease",
    "Settlement",
    "SettleOutcome",
    "SettleResult",
    "DeadLetter",
    "ErrorInfo",
    "ErrorLike",
    "GroupInfo",
    "GroupStateName",
    "QueueStats",
    "ScheduledMessage",
    "Capabilities",
    "PgqueError",
    "ConfigurationError",
    "InvalidInput",
    "ConnectionLost",
    "PartialFailure",
    "PartlySettled",
    "QueueMoving",
    "RetryableConflict",
    "SchemaMismatch",
    "TransportClosed",
    "InMemoryTransport",
    "AsyncInMemoryTransport",
    "MemoryStore",
    "QueueModel",
    "Backend",
    "connect",
    "connect_async",
    "Settings",
    "OnExhausted",
    "TransportOptions",
    "mask_url",
    "Worker",
    "AsyncWorker",
    "WorkerReport",
    "Outcome",
    "RetryPolicy",
    "Retry",
    "Reject",
    "WorkerHooks",
    "MetricsHooks",
    "CompositeHooks",
    "Router",
    "Schedule",
    "ScheduleEntry",
    "Scheduler",
    "AsyncScheduler",
    "PublishedTick",
]

__version__ = "0.1.0"
