"""What the dashboard's tests share: in-memory scenes, a client, the CSRF token of a page, hostile
text."""

from __future__ import annotations

import re
from typing import Any

from starlette.testclient import TestClient

from pgque.conformance.hostile_async import HOSTILE_GROUP_IDS, HOSTILE_MARKUP
from pgque.core import AsyncInMemoryTransport, InMemoryTransport, MemoryStore
from pgque.core.transport_options import OnExhausted


class Scene:
    """One in-memory store: ``sync(queue)`` sets the scene, ``async_(queue)`` is what the app
    reads (both see the same queues)."""

    def __init__(self) -> None:
        self.store = MemoryStore()

    def sync(
        self,
        queue: str = "orders",
        *,
        max_attempts: int | None = 3,
        on_exhausted: OnExhausted = "dead_letter",
    ) -> InMemoryTransport:
        """A blocking transport on *queue* of this store."""
        return InMemoryTransport(
            store=self.store, queue=queue, max_attempts=max_attempts, on_exhausted=on_exhausted
        )

    def async_(self, queue: str = "orders") -> AsyncInMemoryTransport:
        """An asyncio transport on *queue* of this store."""
        return AsyncInMemoryTransport(store=self.store, queue=queue)


#: Where the tests' client says it is: a Host the dashboard serves by default (Starlette's
#: TestClient would say ``testserver``, which it refuses).
BASE = "http://127.0.0.1"


def client(app: Any, **options: Any) -> TestClient:
    """Starlette's TestClient on *app*, with the Host of :data:`BASE`."""
    return TestClient(app, base_url=BASE, **options)


_CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')


def csrf_of(html: str) -> str:
    """Return the CSRF token of the first action form of *html*."""
    found = _CSRF.search(html)
    assert found is not None, "no action form on the page"
    return found.group(1)


#: Every hostile group id: the conformance catalogue's and the markup above.
HOSTILE_IDS = (*HOSTILE_GROUP_IDS, *HOSTILE_MARKUP, "a/b", "a//b/", "/lead", "..", ".", "?x=1#y")
