"""The shared wake-up waiter: one reader, the wake counter, the first call's True, draining."""

from __future__ import annotations

import asyncio
import threading

import pytest

from pgque.core.wakeups import AsyncWakeupWaiter, WakeupWaiter


class Listener:
    """A scripted listener: records calls; ``heard`` answers from a list (or blocks)."""

    def __init__(self, *, can_listen: bool = True) -> None:
        self.open = False
        self.can_listen = can_listen
        self.calls: list[str] = []
        self.answers: list[bool | Exception] = []
        self.gate: asyncio.Event | None = None
        self.reading = asyncio.Event()  # set when heard() starts waiting on the gate

    def listening(self) -> bool:
        return self.open

    async def listen(self) -> bool:
        self.calls.append("listen")
        self.open = self.can_listen
        return self.can_listen

    async def heard(self, timeout: float) -> bool:
        self.calls.append("heard")
        if self.gate is not None:
            self.reading.set()
            await self.gate.wait()
            return True
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def drain(self) -> None:
        self.calls.append("drain")

    async def reset(self) -> None:
        self.calls.append("reset")
        self.open = False

    def waiter(self) -> AsyncWakeupWaiter:
        return AsyncWakeupWaiter(
            listening=self.listening,
            listen=self.listen,
            heard=self.heard,
            drain=self.drain,
            reset=self.reset,
        )


@pytest.mark.asyncio
async def test_first_wait_listens_and_says_true_then_waits_hear_and_drain() -> None:
    listener = Listener()
    waiter = listener.waiter()
    assert await waiter.wait(1.0) is True  # a publish just before listening was not heard
    listener.answers = [False, True]
    assert await waiter.wait(0.01) is False
    assert await waiter.wait(1.0) is True
    assert listener.calls == ["listen", "heard", "heard", "drain"]
    assert waiter.wakes == 2


@pytest.mark.asyncio
async def test_without_a_listener_a_wait_sleeps_and_says_false() -> None:
    listener = Listener(can_listen=False)
    waiter = listener.waiter()
    started = asyncio.get_running_loop().time()
    assert await waiter.wait(0.05) is False
    assert asyncio.get_running_loop().time() - started >= 0.04
    assert listener.calls == ["listen"]


@pytest.mark.asyncio
async def test_a_failed_listener_is_reset_and_the_next_wait_listens_again() -> None:
    listener = Listener()
    waiter = listener.waiter()
    await waiter.wait(1.0)
    listener.answers = [ConnectionError("cut")]
    with pytest.raises(ConnectionError):
        await waiter.wait(1.0)
    assert listener.calls == ["listen", "heard", "reset"]
    assert await waiter.wait(1.0) is True
    assert listener.calls[-1] == "listen"


@pytest.mark.asyncio
async def test_a_cancelled_listen_leaves_no_half_open_listener() -> None:
    listener = Listener()
    inside = asyncio.Event()

    async def never(self: Listener = listener) -> bool:
        self.open = True  # half-way: the subscription object exists, the subscribe did not end
        inside.set()
        await asyncio.Event().wait()
        return True

    waiter = AsyncWakeupWaiter(
        listening=listener.listening,
        listen=never,
        heard=listener.heard,
        drain=listener.drain,
        reset=listener.reset,
    )
    task = asyncio.create_task(waiter.wait(5.0))
    await inside.wait()  # cancel it inside listen(), not while it takes the lock
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert listener.calls == ["reset"]
    assert not listener.open


@pytest.mark.asyncio
async def test_a_queued_caller_returns_with_the_one_that_heard() -> None:
    listener = Listener()
    waiter = listener.waiter()
    await waiter.wait(1.0)
    listener.gate = asyncio.Event()
    reader = asyncio.create_task(waiter.wait(5.0))
    await listener.reading.wait()
    queued = asyncio.create_task(waiter.wait(5.0))
    for _ in range(5):  # let it reach the lock and block there
        await asyncio.sleep(0)
    assert not queued.done()
    listener.gate.set()
    assert await reader is True
    assert await queued is True
    assert listener.calls == ["listen", "heard", "drain"]  # the queued one never read


@pytest.mark.asyncio
async def test_a_queued_caller_times_out_when_nothing_comes() -> None:
    listener = Listener()
    waiter = listener.waiter()
    await waiter.wait(1.0)
    listener.gate = asyncio.Event()
    reader = asyncio.create_task(waiter.wait(5.0))
    await listener.reading.wait()
    assert await waiter.wait(0.01) is False  # the lock was never free, and no one heard
    listener.gate.set()
    assert await reader is True


def test_the_blocking_twin_serves_threads_the_same_way() -> None:
    opened = threading.Event()
    gate = threading.Event()
    calls: list[str] = []

    def listen() -> bool:
        calls.append("listen")
        opened.set()
        return True

    def heard(timeout: float) -> bool:
        calls.append("heard")
        return gate.wait(timeout)

    waiter = WakeupWaiter(
        listening=opened.is_set,
        listen=listen,
        heard=heard,
        drain=lambda: calls.append("drain"),
        reset=opened.clear,
    )
    assert waiter.wait(1.0) is True
    assert waiter.wait(0.01) is False
    gate.set()
    assert waiter.wait(1.0) is True
    assert calls == ["listen", "heard", "heard", "drain"]
