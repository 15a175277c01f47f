"""DueWait: an idle wait ends at the next scheduled message's due time, never sooner than the
floor, and backs off while due messages stay unjoined; the waiter honours the cap."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from pgque.core.wakeups import AsyncWakeupWaiter, DueWait, WakeupWaiter


def test_nothing_scheduled_leaves_the_whole_wait() -> None:
    assert DueWait(0.02).cap(5.0, None) is None


def test_the_wait_ends_at_the_due_time_when_it_comes_first() -> None:
    due = DueWait(0.02)
    assert due.cap(5.0, 1.5) == 1.5
    assert due.cap(5.0, 5.0) is None  # not sooner than the timeout
    assert due.cap(5.0, 9.0) is None


def test_a_due_time_just_passed_or_near_waits_the_floor() -> None:
    due = DueWait(0.02)
    assert due.cap(5.0, 0.001) == 0.02
    assert due.cap(5.0, -3.0) == 0.02
    assert due.cap(0.01, 0.001) is None  # the floor is no sooner than a shorter timeout


def test_unjoined_due_messages_back_off_from_the_floor_and_reset() -> None:
    due = DueWait(0.02, 1.0)
    caps = [due.cap(5.0, None, due_now=True) for _ in range(8)]
    assert caps == [0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0, 1.0]
    assert due.cap(5.0, None) is None  # none waiting: back to the floor
    assert due.cap(5.0, None, due_now=True) == 0.02


def test_the_sooner_of_the_due_time_and_the_backoff_wins() -> None:
    due = DueWait(0.02, 1.0)
    for _ in range(4):
        due.cap(5.0, None, due_now=True)  # the backoff is now 0.32
    assert due.cap(5.0, 0.1, due_now=True) == 0.1
    assert due.cap(5.0, 3.0, due_now=True) == 0.64
    assert due.cap(0.5, 3.0, due_now=True) is None  # 1.0 is not sooner than 0.5


def test_without_a_backoff_ceiling_due_now_waits_the_floor() -> None:
    due = DueWait(0.001)
    assert [due.cap(5.0, None, due_now=True) for _ in range(3)] == [0.001] * 3


@pytest.mark.asyncio
async def test_the_waiter_ends_at_the_due_cap_with_true() -> None:
    async def heard(timeout: float) -> bool:
        await asyncio.sleep(timeout)
        return False

    async def nothing() -> None:
        return None

    async def listen() -> bool:
        return True

    listening = [True]
    waiter = AsyncWakeupWaiter(
        listening=lambda: listening[0], listen=listen, heard=heard, drain=nothing, reset=nothing
    )
    started = time.monotonic()
    assert await waiter.wait(5.0, 0.05) is True  # the due time came
    assert time.monotonic() - started < 1.0
    assert await waiter.wait(0.05, 5.0) is False  # a cap past the timeout changes nothing
    assert await waiter.wait(0.05, None) is False


def test_the_blocking_waiter_ends_at_the_due_cap_with_true() -> None:
    quiet = threading.Event()
    waiter = WakeupWaiter(
        listening=lambda: True,
        listen=lambda: True,
        heard=quiet.wait,
        drain=lambda: None,
        reset=lambda: None,
    )
    started = time.monotonic()
    assert waiter.wait(5.0, 0.05) is True
    assert time.monotonic() - started < 1.0
    assert waiter.wait(0.05, 5.0) is False
