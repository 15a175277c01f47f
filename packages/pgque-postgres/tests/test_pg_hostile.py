"""The hostile-input catalogue on the blocking PostgreSQL transport.

``offline_transport`` points at a port nobody listens on: every catalogue call must still raise
InvalidInput (not ConnectionLost), so the checks run before any I/O.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pgque.conformance import TransportFactory
from pgque.conformance.hostile_sync import *  # noqa: F403
from pgque.core import Event, InMemoryTransport, InvalidInput
from pgque.postgres import PostgresTransport


@pytest.fixture
def offline_transport() -> Iterator[PostgresTransport]:
    """Return a transport on a server that does not exist (it never connects)."""
    transport = PostgresTransport("postgresql://nobody:secret@127.0.0.1:9/none", timeout=1)
    yield transport
    transport.close()


def test_a_real_lease_of_another_backend_is_refused(transport_factory: TransportFactory) -> None:
    transport = transport_factory()
    # Same queue name, same group, same message id 1 perhaps: only the origin tells them apart.
    elsewhere = InMemoryTransport(queue=transport.queue)
    elsewhere.publish("g", Event(kind="k"))
    lease = elsewhere.claim()
    assert lease is not None
    transport.publish("g", Event(kind="k"))
    for call in (
        lambda: transport.ack(lease),
        lambda: transport.ack_many([lease]),
        lambda: transport.nack(lease),
        lambda: transport.extend(lease, 10.0),
        lambda: transport.dead_letter(lease, "r"),
    ):
        with pytest.raises(InvalidInput, match="another transport"):
            call()
    stats = transport.stats()
    assert (stats.messages, stats.in_flight) == (1, 0)
