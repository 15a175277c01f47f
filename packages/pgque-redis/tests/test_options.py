"""URL and keyword options: pgque's own are read and removed, the rest go to redis-py."""

from __future__ import annotations

from typing import Any

import pytest
import redis
import redis.asyncio

from pgque.core import (
    AsyncTransport,
    ConfigurationError,
    Event,
    InvalidInput,
    Transport,
    connect,
    connect_async,
)
from pgque.core.validation import DEFAULT_MAX_ATTEMPTS
from pgque.redis import AsyncRedisTransport, RedisBackend, RedisTransport
from pgque.redis._options import NOT_GIVEN, resolve_options


def _resolve(url: str | None, has_client: bool = False, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "queue": None,
        "max_attempts": NOT_GIVEN,
        "on_exhausted": None,
        "clock": None,
        "retries": None,
        "retry_backoff": None,
    }
    args.update(kw)
    return resolve_options(url, has_client=has_client, **args)


def test_own_options_are_removed_from_the_url() -> None:
    opts = _resolve(
        "redis://:pw@host:6380/3?queue=orders&max_attempts=5&on_exhausted=block"
        "&retries=7&retry_backoff=0.5&socket_timeout=2"
    )
    assert opts.url == "redis://:pw@host:6380/3?socket_timeout=2"
    assert opts.common.queue == "orders"
    assert opts.common.max_attempts == 5
    assert opts.common.on_exhausted == "block"
    assert opts.retries == 7
    assert opts.retry_backoff == 0.5
    assert "pw" not in opts.masked_url


def test_unix_url_keeps_its_path_and_db() -> None:
    opts = _resolve("unix:///tmp/redis.sock?db=2&queue=jobs")
    assert opts.url == "unix:///tmp/redis.sock?db=2"
    assert opts.common.queue == "jobs"


def test_rediss_url_is_accepted() -> None:
    opts = _resolve("rediss://host:6380/0?ssl_cert_reqs=none")
    assert opts.url == "rediss://host:6380/0?ssl_cert_reqs=none"
    assert opts.common.queue == "default"
    assert opts.common.max_attempts == DEFAULT_MAX_ATTEMPTS == 10
    assert opts.common.on_exhausted == "dead_letter"


@pytest.mark.parametrize("text", ["none", "None", ""])
def test_max_attempts_none_in_the_url_is_unlimited(text: str) -> None:
    assert _resolve(f"redis://host/0?max_attempts={text}").common.max_attempts is None


def test_max_attempts_none_as_a_keyword_is_unlimited_and_wins_over_the_url() -> None:
    assert _resolve("redis://host/0?max_attempts=3", max_attempts=None).common.max_attempts is None
    assert _resolve("redis://host/0", max_attempts=None).common.max_attempts is None


def test_the_transport_shows_its_retry_policy(redis_url: str, new_queue: Any) -> None:
    with RedisTransport(redis_url, queue=new_queue()) as transport:
        assert (transport.max_attempts, transport.on_exhausted) == (10, "dead_letter")
    with RedisTransport(
        redis_url, queue=new_queue(), max_attempts=None, on_exhausted="block"
    ) as transport:
        assert (transport.max_attempts, transport.on_exhausted) == (None, "block")
    sep = "&" if "?" in redis_url else "?"
    with connect(f"{redis_url}{sep}queue={new_queue()}&max_attempts=none") as transport:
        assert transport.max_attempts is None


def test_keywords_win_over_the_url() -> None:
    opts = _resolve(
        "redis://host/0?queue=a&max_attempts=5&on_exhausted=block&retries=1",
        queue="b",
        max_attempts=2,
        on_exhausted="dead_letter",
        retries=4,
    )
    assert (opts.common.queue, opts.common.max_attempts) == ("b", 2)
    assert opts.common.on_exhausted == "dead_letter"
    assert opts.retries == 4


@pytest.mark.parametrize(
    "query",
    [
        "max_attempts=zero",
        "max_attempts=0",
        "retries=-1",
        "retries=x",
        "retry_backoff=nan",
        "retry_backoff=99",
        "queue=a&queue=b",
    ],
)
def test_bad_url_options_are_refused(query: str) -> None:
    with pytest.raises(ConfigurationError):
        _resolve(f"redis://host/0?{query}")


@pytest.mark.parametrize("query", ["queue=Bad:Name", "on_exhausted=skip"])
def test_bad_common_options_are_invalid_input(query: str) -> None:
    with pytest.raises(InvalidInput):
        _resolve(f"redis://host/0?{query}")


def test_url_or_client_exactly() -> None:
    with pytest.raises(ConfigurationError):
        _resolve(None)
    with pytest.raises(ConfigurationError):
        _resolve("redis://host/0", has_client=True)
    with pytest.raises(ConfigurationError):
        RedisTransport("postgresql://host/db")


def test_connect_picks_the_redis_backend(redis_url: str, new_queue: Any) -> None:
    sep = "&" if "?" in redis_url else "?"
    queue = new_queue()
    with connect(f"{redis_url}{sep}queue={queue}&max_attempts=3&retries=1") as transport:
        assert isinstance(transport, RedisTransport)
        assert isinstance(transport, Transport)
        assert transport.queue == queue
        assert transport.publish("g", Event(kind="k")) == 1
        lease = transport.claim()
        assert lease is not None
        assert lease.origin.startswith("redis:")
        assert lease.queue == queue


@pytest.mark.asyncio
async def test_connect_async_picks_the_redis_backend(redis_url: str, new_queue: Any) -> None:
    sep = "&" if "?" in redis_url else "?"
    queue = new_queue()
    transport = connect_async(f"{redis_url}{sep}queue={queue}")
    assert isinstance(transport, AsyncRedisTransport)
    assert isinstance(transport, AsyncTransport)
    async with transport:
        assert await transport.publish("g", Event(kind="k")) == 1
        assert (await transport.stats()).messages == 1


def test_connect_refuses_unknown_keyword_options() -> None:
    with pytest.raises(ConfigurationError, match="colour"):
        connect("redis://127.0.0.1:6379/0", colour="blue")


def test_backend_serves_both_flavours() -> None:
    assert RedisBackend.package == "pgque-redis"
    assert RedisBackend.open is not None
    assert RedisBackend.open_async is not None


def test_injected_client_is_used_and_left_open(redis_url: str, new_queue: Any) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    transport = RedisTransport(client=client, queue=new_queue())
    assert transport.client is client
    transport.publish("g", Event(kind="k", data={"x": "é"}))
    lease = transport.claim()
    assert lease is not None
    assert lease.event.data == {"x": "é"}
    assert transport.ack(lease)
    transport.close()
    assert client.ping()  # still usable: the caller owns it
    client.close()


@pytest.mark.asyncio
async def test_async_injected_client(redis_url: str, new_queue: Any) -> None:
    client = redis.asyncio.Redis.from_url(redis_url)
    transport = AsyncRedisTransport(client=client, queue=new_queue())
    await transport.publish("g", Event(kind="k"))
    assert (await transport.stats()).messages == 1
    await transport.close()
    assert await client.ping()
    await client.aclose()


@pytest.mark.parametrize("cls", [RedisTransport, AsyncRedisTransport])
@pytest.mark.parametrize("query", ["colour=blue", "socket_timeout=abc"])
def test_bad_redis_url_options_fail_at_construction(cls: Any, query: str) -> None:
    with pytest.raises(ConfigurationError):
        cls(f"redis://127.0.0.1:6379/0?{query}")
