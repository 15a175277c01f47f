"""The generic partition adapter's fenced key lock: take_key_lock under a token of its own, the
block, release_key_lock with that token; a failed release is logged, not raised."""

from __future__ import annotations

import logging

import pytest

from pgque.core import ConfigurationError, ConnectionLost
from pgque.core.memory import AsyncInMemoryTransport, InMemoryTransport
from pgque.core.partition_base import AsyncPartitionAdapterBase, Grant, PartitionAdapterBase


class Recording(PartitionAdapterBase):
    """Grants every key not held, epochs 1, 2, ...; records the calls."""

    def __init__(self, transport: InMemoryTransport, fail_release: Exception | None = None):
        super().__init__(transport)
        self.held: dict[str, str] = {}
        self.calls: list[tuple[str, str, str]] = []
        self.epoch = 0
        self.fail_release = fail_release

    def take_key_lock(self, key: str, token: str, ttl: float) -> int | None:
        self.calls.append(("take", key, token))
        if key in self.held:
            return None
        self.held[key] = token
        self.epoch += 1
        return self.epoch

    def release_key_lock(self, key: str, token: str) -> None:
        self.calls.append(("release", key, token))
        if self.fail_release is not None:
            raise self.fail_release
        if self.held.get(key) == token:
            del self.held[key]


def test_a_granted_lock_is_released_with_its_own_token_after_the_block() -> None:
    with InMemoryTransport() as transport:
        adapter = Recording(transport)
        with adapter.key_lock("k", 5.0) as grant:
            assert grant == Grant(epoch=1)
            with adapter.key_lock("k", 5.0) as second:
                assert second is None  # held: no release for a lock not granted
        (_, _, token), (_, _, refused), _ = adapter.calls
        assert adapter.calls == [
            ("take", "k", token),
            ("take", "k", refused),
            ("release", "k", token),
        ]
        assert token != refused
        assert adapter.held == {}
        with adapter.key_lock("k", 5.0) as again:
            assert again == Grant(epoch=2)


def test_the_lock_is_released_when_the_block_raises() -> None:
    with InMemoryTransport() as transport:
        adapter = Recording(transport)
        with pytest.raises(RuntimeError), adapter.key_lock("k", 5.0):
            raise RuntimeError("the handler failed")
        assert adapter.held == {}


def test_a_failed_release_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    with InMemoryTransport() as transport:
        adapter = Recording(transport, fail_release=ConnectionLost("cut"))
        ran = []
        with caplog.at_level(logging.WARNING, logger="pgque.partition"):
            with adapter.key_lock("k", 5.0) as grant:
                ran.append(grant)
        assert ran == [Grant(epoch=1)]
        assert "could not release the lock of key 'k'" in caplog.text


def test_a_release_failing_with_another_error_propagates() -> None:
    with InMemoryTransport() as transport:
        adapter = Recording(transport, fail_release=RuntimeError("a bug"))
        with pytest.raises(RuntimeError, match="a bug"), adapter.key_lock("k", 5.0):
            pass


def test_the_generic_adapter_has_no_key_lock() -> None:
    with InMemoryTransport() as transport:
        adapter = PartitionAdapterBase(transport)
        assert not adapter.key_locks
        with (
            pytest.raises(ConfigurationError, match="has no key lock; use the Ordered tier"),
            adapter.key_lock("k", 5.0),
        ):
            pass  # pragma: no cover - never entered


@pytest.mark.asyncio
async def test_the_asyncio_adapter_locks_the_same_way() -> None:
    released: list[str] = []

    class AsyncRecording(AsyncPartitionAdapterBase):
        async def take_key_lock(self, key: str, token: str, ttl: float) -> int | None:
            return None if key == "busy" else 7

        async def release_key_lock(self, key: str, token: str) -> None:
            released.append(key)

    async with AsyncInMemoryTransport() as transport:
        adapter = AsyncRecording(transport)
        async with adapter.key_lock("free", 5.0) as grant:
            assert grant == Grant(epoch=7)
        async with adapter.key_lock("busy", 5.0) as none:
            assert none is None
        assert released == ["free"]
        with pytest.raises(ConfigurationError):
            async with AsyncPartitionAdapterBase(transport).key_lock("k", 5.0):
                pass  # pragma: no cover - never entered
