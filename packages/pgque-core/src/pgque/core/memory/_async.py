"""The asyncio in-memory transport: the reference model behind the contract."""

# This file is the source of its blocking twin, _sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import timedelta

from pgque.core.browse import MessageInfo, MessagePage, MessagesQuery
from pgque.core.client import (
    AsyncBrowseClient,
    AsyncFairnessClient,
    AsyncHistoryClient,
    AsyncStoreClient,
    AsyncWorkersClient,
)
from pgque.core.driver import ClaimRequest, GroupCommand, Publication
from pgque.core.fairness import DEFAULT_KEY
from pgque.core.history import HistoryQuery, HistoryRetention, HistorySetting
from pgque.core.live_workers import WorkerBeat
from pgque.core.memory._store import MemoryStore
from pgque.core.models import (
    Capabilities,
    DeadLetter,
    GroupInfo,
    GroupStateName,
    HistoryRecord,
    KeyInfo,
    KeyPolicy,
    Lease,
    QueueStats,
    ScheduledMessage,
    SettleResult,
    WorkerInfo,
)
from pgque.core.queue_model import QueueModel
from pgque.core.transport_options import OnExhausted, TransportOptions
from pgque.core.validation import DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_EVENT_BYTES, CheckedSettlement

__all__ = ["AsyncInMemoryTransport"]

_CAPABILITIES = Capabilities(
    injected_clock=True,
    priorities=True,
    dead_letters=True,
    transactional_publish=False,
    durable=False,
    purge=True,
    queues=True,
    scheduling=True,
    fairness=True,
    history=True,
    browse=True,
    workers=True,
)


def _key(item: Publication) -> str:
    """The model's name of *item*'s fairness key (``""``: the default key)."""
    return DEFAULT_KEY if item.fairness_key is None else item.fairness_key


class _MemoryDriver:
    """One queue of a :class:`MemoryStore`: each primitive is one call of its model, under
    the store's lock, without awaiting (so it is atomic)."""

    backend = "memory"
    capabilities = _CAPABILITIES

    def __init__(self, store: MemoryStore, options: TransportOptions) -> None:
        self._store = store
        self._options = options

    def _model(self) -> QueueModel:
        return self._store.model(self._options.queue)

    @staticmethod
    def _at(now: float | None) -> float:
        return time.time() if now is None else now

    async def open(self) -> str:
        return self._store.origin

    async def publish(
        self, items: Sequence[Publication], priority: int, delay: float, now: float | None
    ) -> list[int]:
        at = self._at(now)
        with self._store.lock:
            model = self._model()
            if delay > 0:
                due = at + delay
                return [
                    model.schedule(i.group_id, i.text, priority, at, due, _key(i)) for i in items
                ]
            return [model.publish(i.group_id, i.text, priority, at, _key(i)) for i in items]

    async def settle_and_claim(
        self, settlements: Sequence[CheckedSettlement], claim: ClaimRequest, now: float | None
    ) -> SettleResult:
        with self._store.lock:
            return self._model().settle_and_claim(
                list(settlements),
                claim.n,
                self._at(now),
                claim.visibility,
                claim.min_priority,
                holder=claim.holders,
                max_attempts=self._options.max_attempts,
                on_exhausted=self._options.on_exhausted,
            )

    async def extend(self, lease: Lease, visibility: float, now: float | None) -> float | None:
        with self._store.lock:
            renewed = self._model().extend(lease, self._at(now), visibility)
        return None if renewed is None else renewed.expires_at

    async def cancel(self, message_id: int, now: float | None) -> bool:
        with self._store.lock:
            return self._model().cancel(message_id, self._at(now))

    async def scheduled(
        self, limit: int, after: int | None, now: float | None
    ) -> list[ScheduledMessage]:
        with self._store.lock:
            return self._model().scheduled_page(self._at(now), limit, after)

    async def publish_tick(
        self, entry: str, tick: float, item: Publication, priority: int, now: float | None
    ) -> int | None:
        with self._store.lock:
            return self._model().publish_tick(
                entry, tick, item.group_id, item.text, priority, self._at(now), _key(item)
            )

    async def last_tick(self, entry: str) -> float | None:
        with self._store.lock:
            return self._model().last_tick(entry)

    async def dead_letters(self, limit: int, after: int | None) -> list[DeadLetter]:
        with self._store.lock:
            return self._model().dead_letters(limit, after)

    async def redrive(
        self, ids: list[int] | None, in_place: bool, retry_now: bool, now: float | None
    ) -> int:
        with self._store.lock:
            return self._model().redrive(ids, self._at(now), in_place, retry_now)

    async def delete_dead_letters(self, ids: list[int]) -> int:
        with self._store.lock:
            return self._model().delete_dead_letters(ids)

    async def group(self, group_id: str, now: float | None) -> GroupInfo | None:
        with self._store.lock:
            return self._model().group(group_id, self._at(now))

    async def groups(
        self,
        state: GroupStateName | None,
        limit: int,
        after: str | None,
        now: float | None,
        prefix: str | None = None,
    ) -> list[GroupInfo]:
        with self._store.lock:
            return self._model().groups_page(self._at(now), state, limit, after, prefix)

    async def messages(self, query: MessagesQuery, now: float | None) -> MessagePage:
        with self._store.lock:
            return self._model().messages_page(query, self._at(now))

    async def message(self, message_id: int, now: float | None) -> MessageInfo | None:
        with self._store.lock:
            return self._model().message(message_id, self._at(now))

    async def group_scheduled(
        self, group_id: str, limit: int, after: int | None, now: float | None
    ) -> list[ScheduledMessage]:
        with self._store.lock:
            return self._model().group_scheduled(group_id, self._at(now), limit, after)

    async def oldest_groups(
        self, state: GroupStateName | None, limit: int, now: float | None
    ) -> list[GroupInfo]:
        with self._store.lock:
            return self._model().oldest_groups(self._at(now), state, limit)

    async def command(
        self, group_id: str, command: GroupCommand, head: int | None, now: float | None
    ) -> bool:
        at = self._at(now)
        with self._store.lock:
            model = self._model()
            if command == "pause":
                return model.pause(group_id, at)
            if command == "resume":
                return model.resume(group_id, at)
            if command == "retry_now":
                return model.retry_now(group_id, at)
            return model.unblock(group_id, at, command == "drop_head", head)

    async def stats(self, now: float | None) -> QueueStats:
        with self._store.lock:
            return self._model().stats(self._at(now))

    async def server_time(self) -> float:
        return time.time()

    async def queues(self) -> list[str]:
        with self._store.lock:
            return self._store.queue_names()

    async def purge(self) -> None:
        with self._store.lock:
            self._model().purge()

    async def set_key_policy(self, key: str | None, policy: KeyPolicy) -> None:
        with self._store.lock:
            self._model().set_key_policy(key, policy)

    async def key_policy(self, key: str | None) -> KeyPolicy | None:
        with self._store.lock:
            return self._model().key_policies.get(key)

    async def delete_key_policy(self, key: str | None) -> bool:
        with self._store.lock:
            return self._model().delete_key_policy(key)

    async def key_info(self, key: str, now: float | None) -> KeyInfo | None:
        with self._store.lock:
            return self._model().key_info(key, self._at(now))

    async def keys(self, limit: int, after: str | None, now: float | None) -> list[KeyInfo]:
        with self._store.lock:
            return self._model().keys_page(self._at(now), limit, after)

    async def set_history(self, setting: HistorySetting) -> None:
        with self._store.lock:
            self._model().set_history(setting)

    async def history(self, query: HistoryQuery, now: float | None) -> list[HistoryRecord]:
        with self._store.lock:
            return self._model().history(query, self._at(now))

    async def heartbeat(self, beat: WorkerBeat, now: float | None) -> None:
        with self._store.lock:
            self._model().heartbeat(beat, self._at(now))

    async def goodbye(self, worker: str) -> bool:
        with self._store.lock:
            return self._model().goodbye(worker)

    async def workers(self, include_gone: bool, now: float | None) -> list[WorkerInfo]:
        with self._store.lock:
            return self._model().worker_infos(include_gone, self._at(now))

    async def close(self) -> None:
        """Nothing to release: the store's data stays for other transports."""


class AsyncInMemoryTransport(
    AsyncBrowseClient,
    AsyncWorkersClient,
    AsyncHistoryClient,
    AsyncFairnessClient,
    AsyncStoreClient,
):
    """A per-group FIFO queue held in this process's memory (asyncio API).

    Task-safe and thread-safe: each operation runs under the store's lock without awaiting, so
    it is atomic. Several transports on one :class:`MemoryStore` share its queues, as workers
    share a database. ``clock`` (epoch seconds) makes time deterministic in tests;
    ``history`` stores the queue's job history setting when it opens (docs/history.md).
    Raises InvalidInput for invalid options.
    """

    CAPABILITIES = _CAPABILITIES

    def __init__(
        self,
        *,
        queue: str = "default",
        max_attempts: int | None = DEFAULT_MAX_ATTEMPTS,
        on_exhausted: OnExhausted = "dead_letter",
        clock: Callable[[], float] | None = None,
        store: MemoryStore | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        history: HistoryRetention | timedelta | str | None = None,
    ) -> None:
        options = TransportOptions(
            queue=queue,
            max_attempts=max_attempts,
            on_exhausted=on_exhausted,
            clock=clock,
            max_event_bytes=max_event_bytes,
            history=history,  # type: ignore[arg-type]  # checked into a setting
        )
        self._store = store if store is not None else MemoryStore()
        AsyncStoreClient.__init__(self, _MemoryDriver(self._store, options), options)

    @property
    def store(self) -> MemoryStore:
        """The store holding this transport's queue."""
        return self._store
