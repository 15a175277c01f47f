"""Where in-memory queues live: a store holds one :class:`QueueModel` per queue name."""

from __future__ import annotations

import threading
import uuid

from pgque.core.queue_model import QueueModel

__all__ = ["MemoryStore", "named_store"]


class MemoryStore:
    """A set of in-memory queues sharing one lock; the unit a lease's ``origin`` names."""

    def __init__(self) -> None:
        self.origin = f"memory:{uuid.uuid4().hex}"
        self.lock = threading.Lock()
        self._queues: dict[str, QueueModel] = {}

    def model(self, queue: str) -> QueueModel:
        """Return the model of *queue*, creating it empty on first use (call under lock)."""
        model = self._queues.get(queue)
        if model is None:
            model = self._queues[queue] = QueueModel(queue=queue, origin=self.origin)
        return model

    def queue_names(self) -> list[str]:
        """Return the queues of this store holding messages (scheduled too) or dead letters
        (call under lock)."""
        return sorted(
            (
                name
                for name, model in self._queues.items()
                if model.groups or model.dead or model.pending
            ),
            key=lambda name: name.encode("utf-8"),
        )


_named: dict[str, MemoryStore] = {}
_named_lock = threading.Lock()


def named_store(name: str) -> MemoryStore:
    """Return the process-wide store called *name* (``memory://NAME``), creating it once."""
    with _named_lock:
        store = _named.get(name)
        if store is None:
            store = _named[name] = MemoryStore()
        return store
