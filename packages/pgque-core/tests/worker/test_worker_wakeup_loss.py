"""A wake-up listener that fails while claims work (its own connection: listen_url) is reported
once, apart from the calls' connection state, and once more when it works again; a whole outage
stays one pair of lines."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest

from pgque.core import ConnectionLost, Event, Worker
from pgque.core.memory import InMemoryTransport
from pgque.core.worker import _reachability

DEADLINE_S = 30.0


class _Listener(InMemoryTransport):
    """An in-memory queue whose wake-up wait fails while ``deaf`` is set."""

    def __init__(self) -> None:
        super().__init__(queue="wakeups")
        self.deaf = threading.Event()
        self.deaf.set()
        self.waits = 0

    def wait_for_messages(self, timeout: float) -> bool:
        self.waits += 1
        if self.deaf.is_set():
            raise ConnectionLost("cannot reach the listener's host")
        time.sleep(min(timeout, 0.005))
        return False


def _until(what: str, ready: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def test_a_deaf_listener_is_one_line_and_its_return_another(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A short stale window: without a tracker of its own, each failed wait followed by a
    # claim that answers would be announced again once the window is over.
    monkeypatch.setattr(_reachability, "STALE_AFTER_BACK_S", 0.02)
    transport = _Listener()
    handled: list[str] = []
    worker = Worker(
        transport,
        lambda event: handled.append(event.kind),
        idle_backoff=(0.002, 0.004),
        reconnect_backoff=(0.002, 0.004),
    )
    caplog.set_level(logging.DEBUG, logger="pgque.worker")
    runner = threading.Thread(target=worker.run, kwargs={"install_signal_handlers": False})
    runner.start()
    try:
        _until("many failed waits", lambda: transport.waits >= 60)
        transport.publish("g", Event(kind="while-deaf"))  # claims work meanwhile
        _until("the message", lambda: handled == ["while-deaf"])
        waits = transport.waits
        _until("more failed waits", lambda: transport.waits >= waits + 30)
        transport.deaf.clear()
        waits = transport.waits
        _until("waits that work", lambda: transport.waits >= waits + 20)
    finally:
        worker.stop()
        runner.join(DEADLINE_S)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert sum("wake-ups failed (wait_for_messages failed" in w for w in warnings) == 1, warnings
    assert sum("wake-ups work again after" in w for w in warnings) == 1, warnings
    assert not any("lost the connection" in w or "connection back" in w for w in warnings)
