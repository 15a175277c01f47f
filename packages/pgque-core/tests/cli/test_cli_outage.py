"""``pgque worker`` against a server that is down: a starting worker waits up to
``--connect-timeout`` and exits 1 with one line, the same on every backend, whether the
connection is refused or never answered; one that comes up within the wait is served.
``--warn-after`` reaches the worker.

Real throwaway servers on their own ports (never the shared services), through the real
console script.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pgque.conformance.servers.restartable import ThrowawayPostgres, ThrowawayRedis, free_port
from pgque.core import Event, connect
from pgque.core.cli._supervisor import START_S

pytestmark = pytest.mark.timeout(120)

Run = Callable[..., subprocess.CompletedProcess[str]]

TIMEOUT = 2.0
#: What a run may take beyond --connect-timeout: the interpreter's start and the slack of
#: the wait (loading the driver, the last attempt's end: 1 s), generous for a loaded machine.
SLACK = 8.0

HANDLER = """
import time

def handle(event):
    with open("handled.txt", "a") as out:
        out.write(event.data["name"] + "\\n")

def slow(event):
    time.sleep(1.3)
"""


@pytest.fixture
def handlers(tmp_path: Path) -> Path:
    (tmp_path / "outage_handlers.py").write_text(HANDLER)
    return tmp_path / "handled.txt"


def _url(backend: str, port: int, password: bool = True) -> str:
    if backend == "postgres":
        return f"postgresql://app:s3cret@127.0.0.1:{port}/x"
    return f"redis://:s3cret@127.0.0.1:{port}/0" if password else f"redis://127.0.0.1:{port}/0"


def _masked(url: str) -> str:
    return url.replace("s3cret", "***")


def _check_one_line(result: subprocess.CompletedProcess[str], url: str, reason: str) -> None:
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr  # one line: no traceback, no log line per attempt
    expected = f"pgque: error: cannot reach {_masked(url)} within {TIMEOUT:g} s: {reason}"
    assert lines[0] == expected
    assert "s3cret" not in result.stderr


@pytest.mark.parametrize(
    "flavour", [[], ["--asyncio"], ["--processes", "2"]], ids=["threads", "asyncio", "processes"]
)
@pytest.mark.parametrize("backend", ["postgres", "redis"])
def test_a_refused_connection_is_waited_for_then_one_line(
    backend: str, flavour: list[str], pgque: Run, handlers: Path
) -> None:
    url = _url(backend, free_port())
    started = time.monotonic()
    result = pgque(
        "worker", "outage_handlers:handle", "--url", url, "--connect-timeout", str(TIMEOUT),
        *flavour,
    )  # fmt: skip
    took = time.monotonic() - started
    _check_one_line(result, url, "connection refused")
    assert TIMEOUT <= took < TIMEOUT + SLACK  # it waited, and no longer than it was told


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel does) and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    try:
        yield int(listener.getsockname()[1])
    finally:
        listener.close()


@pytest.mark.parametrize("backend", ["postgres", "redis"])
def test_a_server_that_never_answers_times_out_with_one_line(
    backend: str, pgque: Run, handlers: Path, silent_port: int
) -> None:
    url = _url(backend, silent_port)
    started = time.monotonic()
    result = pgque(
        "worker", "outage_handlers:handle", "--url", url, "--connect-timeout", str(TIMEOUT)
    )
    took = time.monotonic() - started
    _check_one_line(result, url, "timed out")
    assert TIMEOUT <= took < TIMEOUT + SLACK


@pytest.mark.parametrize("backend", ["postgres", "redis"])
def test_a_server_back_within_the_wait_is_served(backend: str, pgque: Run, handlers: Path) -> None:
    server = ThrowawayPostgres() if backend == "postgres" else ThrowawayRedis()
    try:
        url = server.start()
        with connect(url, queue="cli-outage") as producer:
            producer.publish("g", Event(kind="k", data={"name": "first"}))
        server.down()
        # The server starts again 1.5 s into the worker's wait of up to 20 s.
        timer = threading.Timer(1.5, server.up)
        timer.start()
        try:
            result = pgque(
                "worker",
                "outage_handlers:handle",
                "--url",
                url,
                "--queue",
                "cli-outage",
                "--connect-timeout",
                "20",
                "--stop-when-idle",
            )
        finally:
            timer.join()
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout.strip().splitlines()[-1])["acked"] == 1
        assert handlers.read_text().split() == ["first"]
    finally:
        server.stop()


def test_warn_after_reaches_the_worker(pgque: Run, handlers: Path) -> None:
    server = ThrowawayRedis()
    try:
        url = server.start()
        with connect(url, queue="cli-stuck") as producer:
            producer.publish("g", Event(kind="k", data={"name": "slow"}))
        result = pgque(
            "worker",
            "outage_handlers:slow",
            "--url",
            url,
            "--queue",
            "cli-stuck",
            "--warn-after",
            "0.5",
            "--stop-when-idle",
        )
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    warnings = re.findall(r"WARNING .*handler still running after .* of group g", result.stderr)
    assert 1 <= len(warnings) <= 2  # at 0.5 s and 1 s of a 1.3 s handler
    assert json.loads(result.stdout.strip().splitlines()[-1])["acked"] == 1


def test_warn_after_is_checked(pgque: Run) -> None:
    result = pgque("worker", "x:y", "--url", "memory://", "--warn-after", "0")
    assert result.returncode == 2
    assert "--warn-after" in result.stderr


def test_a_process_replaced_during_an_outage_waits_for_the_server(
    tmp_path: Path, clean_env: dict[str, str], handlers: Path
) -> None:
    """Under --processes, a process started while the server is down (it replaces one that
    died) waits for the server instead of failing its start: the supervisor neither gives up
    nor stops the process riding out the outage, and both serve once the server is back."""
    server = ThrowawayRedis()
    lines: queue.SimpleQueue[str] = queue.SimpleQueue()
    script = str(Path(sys.executable).parent / "pgque")
    try:
        url = server.start()
        proc = subprocess.Popen(
            [script, "worker", "outage_handlers:handle", "--url", url, "--queue", "cli-sup",
             "--processes", "2", "--connect-timeout", str(TIMEOUT)],
            cwd=tmp_path, env=clean_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        stderr = proc.stderr
        assert stderr is not None

        def relay() -> None:
            for line in stderr:
                lines.put(line)

        reader = threading.Thread(target=relay, daemon=True)
        reader.start()
        seen: list[str] = []

        def read_until(text: str, times: int = 1) -> None:
            deadline = time.monotonic() + 60
            while sum(text in line for line in seen) < times:
                assert proc.poll() is None, "".join(seen)
                try:
                    seen.append(lines.get(timeout=max(deadline - time.monotonic(), 0.01)))
                except queue.Empty:
                    raise AssertionError(f"no {text!r} in: {''.join(seen)}") from None

        try:
            read_until("started on queue", 2)
            pids = [
                int(p)
                for p in re.findall(r"started worker process \d \(pid (\d+)\)", "".join(seen))
            ]
            server.down()
            os.kill(pids[0], signal.SIGKILL)
            read_until("waiting for it as long as it takes")
            # Longer than a failed start (5 s) and than --connect-timeout: still all running.
            time.sleep(START_S + TIMEOUT)
            assert proc.poll() is None, "".join(seen)
            assert not any("giving up" in line or "not restarting" in line for line in seen)
            server.up()
            read_until("s of waiting")  # "reached URL after N s of waiting"
            with connect(url, queue="cli-sup") as producer:
                for n in range(4):
                    producer.publish(f"g{n}", Event(kind="k", data={"name": f"m{n}"}))
                deadline = time.monotonic() + 60
                while producer.stats().messages:
                    assert time.monotonic() < deadline, "".join(seen)
                    time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
            reader.join(10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        while not lines.empty():
            seen.append(lines.get())
        assert proc.returncode == 0, "".join(seen)
        assert sorted(handlers.read_text().split()) == [f"m{n}" for n in range(4)]
        assert json.loads(out.strip().splitlines()[-1])["restarts"] == 1
    finally:
        server.stop()
