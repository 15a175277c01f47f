"""``pgque worker`` through the real console script: routers, async handlers and ``--asyncio``,
the transport and retry flags, and the Prometheus endpoint.

Against a real PostgreSQL, where state outlives the ``pgque`` process: each test sets up and
checks through a transport in this process and runs the script for what it tests.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pgque.conformance import process_handlers
from pgque.core import App, Event, connect

Run = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def queue_url(postgres_url: str) -> str:
    """Return the server's URL with a fresh queue name."""
    sep = "&" if "?" in postgres_url else "?"
    return f"{postgres_url}{sep}queue=cliw_{uuid.uuid4().hex[:12]}"


def _module(folder: Path, name: str, code: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(code))


def _report(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return report


ROUTER = """
    import asyncio, threading
    from pgque.core import Router

    router = Router()
    seen = open({out!r}, "a")

    @router.on("order.created")
    def created(event):
        seen.write(f"created {{event.data['n']}}\\n"); seen.flush()

    @router.on("order.paid", "order.refunded")
    def money(event, lease):
        seen.write(f"{{event.kind}} {{lease.group_id}}\\n"); seen.flush()

    async_router = Router()
    async_router.on("order.created")(created)

    @async_router.on("order.paid")
    async def paid(event, lease):
        await asyncio.sleep(0)
        seen.write(f"async {{event.kind}} {{threading.current_thread().name}}\\n"); seen.flush()
"""


def test_worker_runs_a_router_and_dead_letters_unknown_kinds(
    pgque: Run, queue_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "seen.txt"
    _module(tmp_path, "cli_router", ROUTER.format(out=str(out)))
    with connect(queue_url) as transport:
        transport.publish("a", Event(kind="order.created", data={"n": 1}))
        transport.publish("b", Event(kind="order.paid"))
        transport.publish("c", Event(kind="order.refunded"))
        transport.publish("d", Event(kind="order.shipped"))
        result = pgque("worker", "cli_router:router", "--url", queue_url, "--stop-when-idle")
        report = _report(result)
        assert (report["acked"], report["dead_lettered"]) == (3, 1)
        assert sorted(out.read_text().splitlines()) == [
            "created 1",
            "order.paid b",
            "order.refunded c",
        ]
        assert "(threads)" in result.stderr  # a sync router: the blocking worker
        (letter,) = transport.dead_letters()
        assert letter.reason == (
            "no handler for kind 'order.shipped' "
            "(the router knows: 'order.created', 'order.paid', 'order.refunded')"
        )
        assert letter.error is not None
        assert letter.error.type.endswith("Reject")


def test_an_async_router_gets_the_asyncio_worker(
    pgque: Run, queue_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "seen.txt"
    _module(tmp_path, "cli_router", ROUTER.format(out=str(out)))
    with connect(queue_url) as transport:
        transport.publish("a", Event(kind="order.created", data={"n": 2}))
        transport.publish("b", Event(kind="order.paid"))
        result = pgque("worker", "cli_router:async_router", "--url", queue_url, "--stop-when-idle")
        assert _report(result)["acked"] == 2
        assert "(asyncio)" in result.stderr
        assert sorted(out.read_text().splitlines()) == ["async order.paid MainThread", "created 2"]
        assert transport.stats().messages == 0


ASYNC_HANDLER = """
    import asyncio, threading

    async def handle(event):
        await asyncio.sleep(0)
        with open({out!r}, "a") as fh:
            fh.write(f"{{event.kind}} {{threading.current_thread().name}}\\n")

    def blocking(event):
        try:
            asyncio.get_running_loop()
            where = "on the event loop"
        except RuntimeError:
            where = "in a thread"
        with open({out!r}, "a") as fh:
            fh.write(f"sync {{event.kind}} {{where}}\\n")
"""


def test_an_async_handler_runs_on_asyncio_and_asyncio_forces_it(
    pgque: Run, queue_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "seen.txt"
    _module(tmp_path, "cli_async", ASYNC_HANDLER.format(out=str(out)))
    with connect(queue_url) as transport:
        transport.publish("a", Event(kind="first"))
        result = pgque("worker", "cli_async:handle", "--url", queue_url, "--stop-when-idle")
        assert _report(result)["acked"] == 1
        assert "(asyncio)" in result.stderr
        assert out.read_text().splitlines() == ["first MainThread"]
        transport.publish("b", Event(kind="second"))
        forced = pgque(
            "worker", "cli_async:blocking", "--asyncio", "--url", queue_url, "--stop-when-idle"
        )
        assert _report(forced)["acked"] == 1
        assert "(asyncio)" in forced.stderr  # the asyncio worker ran a sync handler in a thread
        assert out.read_text().splitlines() == ["first MainThread", "sync second in a thread"]


FAILING = """
    def handle(event, lease):
        if lease.attempt < {succeed_at}:
            raise ValueError(f"attempt {{lease.attempt}} failed")
"""


@pytest.mark.parametrize("flavour", [[], ["--asyncio"]], ids=["threads", "asyncio"])
def test_max_attempts_and_on_exhausted_flags_beat_env_and_url(
    pgque: Run, queue_url: str, tmp_path: Path, flavour: list[str]
) -> None:
    _module(tmp_path, "cli_failing", FAILING.format(succeed_at=99))
    url = f"{queue_url}&max_attempts=7&on_exhausted=dead_letter"
    env = {"PGQUE_MAX_ATTEMPTS": "5", "PGQUE_ON_EXHAUSTED": "dead_letter"}
    with connect(url) as transport:
        transport.publish("g", Event(kind="job"))
        result = pgque(
            "worker", "cli_failing:handle", *flavour, "--url", url, "--stop-when-idle",
            "--max-attempts", "2", "--on-exhausted", "block",
            "--retry-base", "0", "--retry-jitter", "0",
            env=env,
        )  # fmt: skip
        assert _report(result)["retried"] == 2
        info = transport.group("g")
        assert info is not None
        assert (info.state, info.head_attempts) == ("blocked", 2)
        assert transport.dead_letters() == []


def test_max_attempts_none_is_unlimited(pgque: Run, queue_url: str, tmp_path: Path) -> None:
    _module(tmp_path, "cli_failing", FAILING.format(succeed_at=3))
    url = f"{queue_url}&max_attempts=1"
    with connect(url) as transport:
        transport.publish("g", Event(kind="job"))
        result = pgque(
            "worker", "cli_failing:handle", "--url", url, "--stop-when-idle",
            "--max-attempts", "none", "--retry-base", "0", "--retry-jitter", "0",
        )  # fmt: skip
        report = _report(result)
        assert (report["retried"], report["acked"]) == (2, 1)
        assert transport.dead_letters() == []


def test_bad_max_attempts_is_a_usage_error(pgque: Run, queue_url: str) -> None:
    for bad in ("0", "many"):
        result = pgque("worker", "x:y", "--url", queue_url, "--max-attempts", bad)
        assert result.returncode == 2
        assert "neither an int >= 1 nor 'none'" in result.stderr


def _popen_worker(folder: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    script = str(Path(sys.executable).parent / "pgque")
    return subprocess.Popen(
        [script, "worker", *args],
        cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err  # stopped by Ctrl-C
    return out, err


@pytest.mark.parametrize("flavour", [[], ["--asyncio"]], ids=["threads", "asyncio"])
def test_retry_flags_set_the_policy(
    queue_url: str, tmp_path: Path, clean_env: dict[str, str], flavour: list[str]
) -> None:
    _module(tmp_path, "cli_failing", FAILING.format(succeed_at=99))
    with connect(queue_url) as transport:
        transport.publish("g", Event(kind="job"))
        proc = _popen_worker(
            tmp_path, clean_env, "cli_failing:handle", *flavour, "--url", queue_url,
            "--retry-base", "1.5", "--retry-factor", "3", "--retry-max-delay", "4",
            "--retry-jitter", "0",
        )  # fmt: skip
        delays: dict[int, float] = {}
        deadline = time.monotonic() + 30
        try:
            while len(delays) < 2:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, f"saw only the delays {delays}"
                info = transport.group("g")
                if info and info.state == "parked" and info.resume_at and info.last_error:
                    delays[info.head_attempts] = info.resume_at - info.last_error.at
                time.sleep(0.05)
        finally:
            _stop(proc)
    # 1.5 s after the first attempt, then 1.5 x 3 = 4.5 capped at 4 (no jitter): the defaults
    # would give 1 +-10 % and 2 +-10 %
    assert delays[1] == pytest.approx(1.5, abs=0.05)
    assert delays[2] == pytest.approx(4.0, abs=0.05)


ASYNC_SLOW = """
    import asyncio

    async def handle(event, lease):
        if event.kind == "slow":
            await asyncio.sleep(30)
        with open({out!r}, "a") as fh:
            fh.write(f"{{lease.group_id}} {{lease.priority}}\\n")
"""


def test_min_priority_batch_size_and_hard_timeout_on_the_asyncio_path(
    pgque: Run, queue_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "seen.txt"
    _module(tmp_path, "cli_slow", ASYNC_SLOW.format(out=str(out)))
    with connect(queue_url) as transport:
        transport.publish("low", Event(kind="job"), priority=0)
        for n in range(4):
            transport.publish(f"high{n}", Event(kind="job"), priority=3)
        result = pgque(
            "worker", "cli_slow:handle", "--url", queue_url, "--stop-when-idle",
            "--min-priority", "3", "--batch-size", "4",
        )  # fmt: skip
        assert _report(result)["acked"] == 4
        assert sorted(out.read_text().splitlines()) == [f"high{n} 3" for n in range(4)]
        transport.publish("slow", Event(kind="slow"), priority=3)
        started = time.monotonic()
        timed = pgque(
            "worker", "cli_slow:handle", "--url", queue_url, "--stop-when-idle",
            "--min-priority", "3", "--hard-timeout", "0.5", "--visibility", "1",
            "--max-attempts", "1",
        )  # fmt: skip
        assert _report(timed)["timed_out"] == 1
        assert time.monotonic() - started < 25  # abandoned, not awaited for 30 s
        assert "(asyncio)" in timed.stderr
        (letter,) = transport.dead_letters()
        assert (letter.group_id, letter.reason) == ("slow", "max_attempts (1) exhausted")
        assert letter.error is not None
        assert "hard_timeout (0.5s)" in letter.error.message
        low = transport.group("low")
        assert low is not None
        assert low.depth == 1  # below --min-priority: never claimed


HANGS = """
    import os, time

    def handle(event):
        with open({out!r}, "a") as fh:
            fh.write(f"{{event.data['n']}} {{os.getpid()}}\\n")
        if event.data["n"] == 0:
            time.sleep(600)
"""


def test_isolation_process_kills_a_hung_handler_at_its_hard_timeout(
    pgque: Run, queue_url: str, tmp_path: Path
) -> None:
    """``--isolation process``: the handler runs in a child process of the worker (imported
    from the working directory), which the hard timeout kills; the group's next message runs."""
    out = tmp_path / "seen.txt"
    _module(tmp_path, "cli_hangs", HANGS.format(out=str(out)))
    with connect(queue_url) as transport:
        for n in range(2):
            transport.publish("g", Event(kind="job", data={"n": n}))
        result = pgque(
            "worker", "cli_hangs:handle", "--url", queue_url, "--stop-when-idle",
            "--isolation", "process", "--hard-timeout", "1", "--max-attempts", "1",
        )  # fmt: skip
        report = _report(result)
        assert (report["timed_out"], report["acked"]) == (1, 1), report
        assert "(handler processes)" in result.stderr
        runs = [line.split() for line in out.read_text().splitlines()]
        assert [n for n, _ in runs] == ["0", "1"]
        assert not process_handlers.pid_alive(int(runs[0][1]))  # killed, not left running
        (letter,) = transport.dead_letters()
        assert letter.error is not None
        assert "hard_timeout (1s)" in letter.error.message


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text: str = response.read().decode()
        return text


def _acked(metrics: str, queue: str) -> float:
    pattern = rf'pgque_worker_messages_total\{{(?=[^}}]*outcome="acked")(?=[^}}]*queue="{queue}")'
    for line in metrics.splitlines():
        if re.match(pattern, line):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize("flavour", [[], ["--asyncio"]], ids=["threads", "asyncio"])
def test_prometheus_endpoint_serves_the_running_worker(
    queue_url: str, tmp_path: Path, clean_env: dict[str, str], flavour: list[str]
) -> None:
    _module(tmp_path, "cli_quiet", "def handle(event):\n    pass\n")
    queue = queue_url.rsplit("=", 1)[1]
    port = _free_port()
    with connect(queue_url) as transport:
        transport.publish_many([(f"g{n}", Event(kind="job")) for n in range(3)])
    proc = _popen_worker(
        tmp_path, clean_env, "cli_quiet:handle", *flavour, "--url", queue_url,
        "--prometheus-port", str(port),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        acked = 0.0
        while acked < 3:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the endpoint never showed 3 acked messages"
            with contextlib.suppress(OSError):  # not listening yet
                acked = _acked(_scrape(port), queue)
            time.sleep(0.05)
        assert acked == 3
    finally:
        out, err = _stop(proc)
    assert f"serving Prometheus metrics on http://127.0.0.1:{port}/metrics" in err
    assert json.loads(out.strip().splitlines()[-1])["acked"] == 3


def test_prometheus_port_taken_is_one_line(
    pgque: Run, queue_url: str, tmp_path: Path, error_line: Callable[..., str]
) -> None:
    _module(tmp_path, "cli_quiet", "def handle(event):\n    pass\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = pgque(
            "worker", "cli_quiet:handle", "--url", queue_url, "--prometheus-port", str(port)
        )
    line = error_line(result)
    assert line == f"pgque: error: cannot serve metrics on 127.0.0.1:{port}: Address already in use"


TASKS = """
    from pgque.core import App

    app = App({url!r})
    seen = open({out!r}, "a")

    @app.task(group="order-{{order_id}}", kind="charge")
    def charge(order_id: int, cents: int) -> None:
        seen.write(f"{{order_id}} {{cents}}\\n"); seen.flush()
"""


def test_worker_runs_a_task_app_on_its_own_url(pgque: Run, queue_url: str, tmp_path: Path) -> None:
    out = tmp_path / "seen.txt"
    _module(tmp_path, "cli_tasks", TASKS.format(url=queue_url, out=str(out)))
    # The producer side: the same task declared in this process (tasks share the wire format).
    with App(queue_url) as producer:

        @producer.task(group="order-{order_id}", kind="charge")
        def charge(order_id: int, cents: int) -> None: ...

        charge.defer(order_id=1, cents=250)
        charge.defer(order_id=1, cents=300)
    # No --url and no PGQUE_URL: the app's own URL (and queue) is used.
    result = pgque("worker", "cli_tasks:app", "--stop-when-idle")
    assert _report(result)["acked"] == 2
    assert out.read_text().splitlines() == ["1 250", "1 300"]
    with connect(queue_url) as transport:
        assert transport.stats().messages == 0
