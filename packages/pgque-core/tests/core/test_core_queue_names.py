"""Queue names follow one fixed grammar, ``[A-Za-z][A-Za-z0-9_.-]{0,63}``, at every entry point.

Transports refuse a bad name with InvalidInput, ``connect()`` (keyword or ``?queue=``) with
ConfigurationError, both before any I/O: the server URLs below point at a closed port, so a name
that slipped through would surface as ConnectionLost instead. The command line's checks are in
tests/cli/test_cli_hostile.py.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest

from pgque.core import (
    AsyncInMemoryTransport,
    ConfigurationError,
    InMemoryTransport,
    InvalidInput,
    connect,
    connect_async,
)
from pgque.core.transport_options import TransportOptions
from pgque.core.validation import check_queue_name

GOOD = ["a", "orders", "orders_eu_2", "q" + "x" * 63, "orders-v2", "Billing.EU", "Z", "a.b-c_d"]
BAD: list[Any] = [
    "",
    "1orders",
    "_orders",
    "-orders",
    ".orders",
    "orders eu",
    "orders;drop",
    "x'; DROP TABLE pgque_fifo.messages; --",
    '"q"',
    "{pgque:x}",
    "q]]",
    "é",
    "q" * 65,
    "orders/eu",
    "orders:eu",
    "orders%2F",
    "q\x00",
    "q\n",
    # (None is not here: the Redis transport reads queue=None as "not given, use ?queue=".)
    1,
    b"orders",
]

URLS = {
    "memory": "memory://",
    "postgresql": "postgresql://app:pw@127.0.0.1:9/app?timeout=1",
    "redis": "redis://:pw@127.0.0.1:9/0?retries=0",
}


def _opener(scheme: str) -> list[Callable[..., Any]]:
    """Return the transport classes of *scheme*, skipping when the backend is not installed."""
    if scheme == "memory":
        return [InMemoryTransport, AsyncInMemoryTransport]
    if scheme == "postgresql":
        sync = pytest.importorskip("pgque.postgres").PostgresTransport
        asyncio = importlib.import_module("pgque.postgres_async").AsyncPostgresTransport
        return [lambda **kw: sync(URLS[scheme], **kw), lambda **kw: asyncio(URLS[scheme], **kw)]
    redis = pytest.importorskip("pgque.redis")
    return [
        lambda **kw: redis.RedisTransport(URLS[scheme], **kw),
        lambda **kw: redis.AsyncRedisTransport(URLS[scheme], **kw),
    ]


@pytest.mark.parametrize("name", GOOD)
def test_names_in_the_grammar_are_accepted(name: str) -> None:
    assert check_queue_name(name) == name
    assert TransportOptions(queue=name).queue == name
    with connect(f"memory://?queue={name}") as transport:
        assert transport.queue == name


@pytest.mark.parametrize("scheme", sorted(URLS))
@pytest.mark.parametrize("name", BAD, ids=repr)
def test_every_entry_point_refuses_a_name_outside_the_grammar(scheme: str, name: Any) -> None:
    for open_transport in _opener(scheme):
        with pytest.raises(InvalidInput, match="queue name"):
            open_transport(queue=name)
    with pytest.raises(ConfigurationError, match="queue name"):
        connect(URLS[scheme], queue=name)
    with pytest.raises(ConfigurationError, match="queue name"):
        connect_async(URLS[scheme], queue=name)
    if isinstance(name, str) and "\x00" not in name:
        sep = "&" if "?" in URLS[scheme] else "?"
        with pytest.raises(ConfigurationError, match="queue name"):
            connect(f"{URLS[scheme]}{sep}queue={quote(name, safe='')}")
