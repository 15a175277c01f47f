"""The pooler options on the asyncio transport, through real PgBouncers of the tests' own
(transaction pooling; skipped when pgbouncer is not installed, as the plugin says)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio

from pgque.conformance.servers.pgbouncer import PgBouncer
from pgque.core import ConfigurationError, Event, InvalidInput
from pgque.postgres_async import AsyncPostgresTransport

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(60)]

Make = Callable[..., Awaitable[AsyncPostgresTransport]]


async def test_a_bad_listen_url_is_refused_at_once() -> None:
    with pytest.raises(InvalidInput, match="listen_url"):
        AsyncPostgresTransport("postgresql://u@h/db", listen_url="postgresql://u@h/db?queue=q")


@pytest_asyncio.fixture
async def through(pgbouncer_factory: Callable[..., PgBouncer]) -> AsyncIterator[Make]:
    """Return ``await make(**options)``: a transport (one client connection) through a PgBouncer
    of the test's own whose pool has one server connection, shared by every client in turn."""
    pgbouncer_url = pgbouncer_factory(pool_size=1).url
    opened: list[AsyncPostgresTransport] = []

    async def make(**options: object) -> AsyncPostgresTransport:
        options.setdefault("min_size", 1)
        options.setdefault("max_size", 1)
        transport = await AsyncPostgresTransport.from_dsn(pgbouncer_url, **options)  # type: ignore[arg-type]
        opened.append(transport)
        return transport

    yield make
    for transport in opened:
        await transport.close()


async def test_prepared_statements_clash_behind_pgbouncer_unless_off(through: Make) -> None:
    first = await through(queue="apb_prep")
    for _ in range(6):
        await first.stats()
    second = await through(queue="apb_prep")
    for _ in range(5):  # psycopg prepares a statement on its sixth run
        await second.stats()
    with pytest.raises(ConfigurationError, match="prepared_statements=off"):
        await second.stats()
    third = await through(queue="apb_prep", prepared_statements=False)
    for _ in range(8):
        await third.stats()


async def test_listen_url_hears_what_the_pooler_loses(through: Make, postgres_url: str) -> None:
    deaf = await through(queue="apb_listen", prepared_statements=False)
    heard = await through(queue="apb_listen", prepared_statements=False, listen_url=postgres_url)
    assert await deaf.wait_for_messages(1.0) is True  # the first call: listening now
    assert await heard.wait_for_messages(1.0) is True
    await heard.publish("g", Event(kind="k"))
    assert await heard.wait_for_messages(10.0) is True
    assert await deaf.wait_for_messages(0.5) is False
    await heard.purge()
