"""``pgque worker --processes N`` against a real PostgreSQL, through the console script.

Each test waits on what it can observe (a file a handler wrote, a lease the server shows, a
line the supervisor logged), never on a guessed delay: the handlers block on files the test
creates when it has seen what it needs.
"""

from __future__ import annotations

import ast
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest

from pgque.core import Event, SupportsWorkers, connect

Run = Callable[..., subprocess.CompletedProcess[str]]

#: How long any wait of these tests may last before it fails (the tests take seconds).
DEADLINE_S = 60.0


@pytest.fixture
def queue_url(postgres_url: str) -> str:
    """Return the server's URL with a fresh queue name."""
    sep = "&" if "?" in postgres_url else "?"
    return f"{postgres_url}{sep}queue=procs_{uuid.uuid4().hex[:12]}"


def _wait_for(what: str, ready: Callable[[], bool]) -> None:
    """Return once *ready()* is true; fail after DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _read_until(stream: IO[str], text: str, times: int) -> None:
    """Read lines of *stream* until *text* was in *times* of them; fail at its end."""
    seen = 0
    while seen < times:
        line = stream.readline()
        assert line, f"the output ended before {times} lines with {text!r}"
        seen += text in line


def _write_handlers(folder: Path, body: str) -> None:
    (folder / "proc_handlers.py").write_text(textwrap.dedent(body))


def _lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def _started_pids(stderr: str) -> list[int]:
    return [int(m) for m in re.findall(r"started worker process \d+ \(pid (\d+)\)", stderr)]


@pytest.fixture
def popen(
    tmp_path: Path, clean_env: dict[str, str]
) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Return ``start(*args)``: the console script in the background; killed if left running."""
    script = str(Path(sys.executable).parent / "pgque")
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [script, *args],
            cwd=tmp_path,
            env=clean_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_two_processes_handle_every_group_in_order_and_sum_their_reports(
    pgque: Run, queue_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "seen.txt"
    _write_handlers(
        tmp_path,
        f"""
        import os

        def handle(event, lease):
            with open({str(log)!r}, "a") as fh:
                fh.write(f"{{os.getpid()}} {{lease.group_id}} {{event.data['n']}}\\n")
        """,
    )
    groups, per_group = 100, 3
    with connect(queue_url) as transport:
        transport.publish_many(
            [
                (f"g{g}", Event(kind="step", data={"n": n}))
                for n in range(per_group)
                for g in range(groups)
            ]
        )
        result = pgque(
            "worker", "proc_handlers:handle", "--url", queue_url, "--processes", "2",
            "--stop-when-idle", "-c", "2", timeout=DEADLINE_S,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert transport.stats().messages == 0
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout
    report = json.loads(lines[0])
    assert (report["acked"], report["claimed"], report["processes"]) == (300, 300, 2)
    seen: dict[str, list[int]] = defaultdict(list)
    for _, group, n in _lines(log):
        seen[group].append(int(n))
    assert seen == {f"g{g}": list(range(per_group)) for g in range(groups)}
    # Both processes ran a worker; the report is the sum of the two they logged on stopping.
    started = _started_pids(result.stderr)
    assert len(set(started)) == 2
    logged = [
        ast.literal_eval(m) for m in re.findall(r"worker \S+:\d+ stopped: (\{.*\})", result.stderr)
    ]
    assert len(logged) == 2, result.stderr
    for key in ("claimed", "acked", "retried", "released", "errors"):
        assert report[key] == sum(one[key] for one in logged)


def test_a_killed_process_is_replaced_and_its_message_redelivered(
    popen: Callable[..., subprocess.Popen[str]], queue_url: str, tmp_path: Path
) -> None:
    log, victim, gate = tmp_path / "seen.txt", tmp_path / "victim", tmp_path / "gate"
    # The first delivery of a/0 blocks until the test kills its process (the gate never opens).
    _write_handlers(
        tmp_path,
        f"""
        import os, time

        def handle(event, lease):
            if (lease.group_id, event.data["n"], lease.attempt) == ("a", 0, 1):
                with open({str(victim)!r} + ".tmp", "w") as fh:
                    fh.write(str(os.getpid()))
                os.replace({str(victim)!r} + ".tmp", {str(victim)!r})
                while not os.path.exists({str(gate)!r}):
                    time.sleep(0.01)
            line = f"{{os.getpid()}} {{lease.group_id}} {{event.data['n']}} {{lease.attempt}}"
            with open({str(log)!r}, "a") as fh:
                fh.write(line + "\\n")
        """,
    )
    with connect(queue_url) as transport:
        transport.publish("a", Event(kind="step", data={"n": 0}))
        proc = popen(
            "worker", "proc_handlers:handle", "--url", queue_url, "--processes", "2",
            "--stop-when-idle", "--visibility", "1",
        )  # fmt: skip
        _wait_for("the handler of a/0", victim.exists)
        pid = int(victim.read_text())
        _wait_for("a/0's lease", lambda: transport.stats().in_flight == 1)
        info = transport.group("a")
        assert info is not None
        assert info.lease_holder is not None
        assert f":{pid}:" in info.lease_holder
        # Only now the rest: the victim handled nothing else, so nothing it did is half done.
        transport.publish_many(
            [(g, Event(kind="step", data={"n": n})) for g in ("a", "b", "c") for n in range(1, 6)]
        )
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=DEADLINE_S)
        assert proc.returncode == 0, err
        assert transport.stats().messages == 0
    started = _started_pids(err)
    assert len(started) == 3, err  # the two first ones and the replacement
    assert pid in started[:2]
    assert len(set(started)) == 3
    assert re.search(rf"worker process \d \(pid {pid}\) was killed by SIGKILL", err), err
    done = [(group, int(n), int(attempt)) for _, group, n, attempt in _lines(log)]
    assert sorted((g, n) for g, n, _ in done) == sorted(
        [("a", 0)] + [(g, n) for g in ("a", "b", "c") for n in range(1, 6)]
    )  # every message once
    assert [n for g, n, _ in done if g == "a"] == [0, 1, 2, 3, 4, 5]
    assert ("a", 0, 2) in done  # redelivered once its lease expired
    assert pid not in {int(p) for p, *_ in _lines(log)}
    assert json.loads(out.strip())["processes"] == 2


def test_sigterm_stops_every_process_gracefully(
    popen: Callable[..., subprocess.Popen[str]], queue_url: str, tmp_path: Path
) -> None:
    begun, gate, finished = tmp_path / "begun", tmp_path / "gate", tmp_path / "finished"
    _write_handlers(
        tmp_path,
        f"""
        import os, time

        def handle(event):
            open({str(begun)!r}, "w").close()
            while not os.path.exists({str(gate)!r}):
                time.sleep(0.01)
            open({str(finished)!r}, "w").close()
        """,
    )
    with connect(queue_url) as transport:
        transport.publish("g", Event(kind="job"))
        proc = popen(
            "worker", "proc_handlers:handle", "--url", queue_url, "--processes", "2",
            "--log-level", "INFO",
        )  # fmt: skip
        assert proc.stderr is not None
        # Both workers run (a signal before a worker's own handlers are set would kill it).
        _read_until(proc.stderr, "started on queue", 2)
        _wait_for("the handler", begun.exists)
        proc.send_signal(signal.SIGTERM)
        # Both processes got it, one with a handler to finish.
        _read_until(proc.stderr, "received SIGTERM: finishing in-flight messages", 2)
        assert not finished.exists()
        gate.touch()
        out, err = proc.communicate(timeout=DEADLINE_S)
        assert proc.returncode == 0, err
        assert finished.exists()
        assert transport.stats().messages == 0
    report = json.loads(out.strip())
    assert (report["acked"], report["processes"]) == (1, 2)
    assert "Traceback" not in err


def _error_line(result: subprocess.CompletedProcess[str]) -> str:
    """Return the one ``pgque: error:`` line, the last of stderr (the supervisor logs before)."""
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("pgque: error: ")]
    assert len(errors) == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1] == errors[0], result.stderr
    return errors[0]


def test_a_handler_that_fails_to_import_stops_the_supervisor(pgque: Run, queue_url: str) -> None:
    began = time.monotonic()
    result = pgque("worker", "no_such_module:handle", "--url", queue_url, "--processes", "2")
    line = _error_line(result)
    assert result.returncode == 1
    assert re.search(r"worker process \d \(pid \d+\) exited with code 1 .*after it started", line)
    assert "cannot import 'no_such_module'" in line
    assert time.monotonic() - began < 30
    assert result.stdout == ""


def test_processes_that_die_at_once_stop_the_supervisor(
    pgque: Run, queue_url: str, tmp_path: Path
) -> None:
    _write_handlers(tmp_path, "import os\nos._exit(3)\n")
    result = pgque("worker", "proc_handlers:handle", "--url", queue_url, "--processes", "3")
    line = _error_line(result)
    assert re.search(r"worker process \d \(pid \d+\) exited with code 3 ", line), line
    assert "not restarting" in line


def test_a_third_sigterm_leaves_a_handler_that_cannot_be_stopped_behind(
    popen: Callable[..., subprocess.Popen[str]], queue_url: str, tmp_path: Path
) -> None:
    """The second signal stops at once, but a handler in a thread cannot be stopped: its lease
    is kept (its group held) while the worker waits for it; a third signal makes the worker
    exit without it, the lease left to expire (counted lost: the expiry counts an attempt)."""
    begun = tmp_path / "begun"
    _write_handlers(
        tmp_path,
        f"""
        import threading

        def handle(event):
            open({str(begun)!r}, "w").close()
            threading.Event().wait()  # never returns
        """,
    )
    with connect(queue_url) as transport:
        transport.publish("g", Event(kind="job"))
        proc = popen("worker", "proc_handlers:handle", "--url", queue_url, "--processes", "2")
        assert proc.stderr is not None
        _read_until(proc.stderr, "started on queue", 2)
        _wait_for("the handler", begun.exists)
        proc.send_signal(signal.SIGTERM)
        _read_until(proc.stderr, "received SIGTERM: finishing in-flight messages", 2)
        proc.send_signal(signal.SIGTERM)
        _read_until(proc.stderr, "runs in a thread, which cannot be stopped", 1)
        assert transport.stats().in_flight == 1  # kept: nobody else can take the group
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=DEADLINE_S)
        assert proc.returncode == 0, err
        assert transport.stats().in_flight == 1  # left to expire, not released
    report = json.loads(out.strip())
    assert (report["acked"], report["released"], report["lost"]) == (0, 0, 1)


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_worker_processes_stop_when_their_supervisor_is_killed(
    popen: Callable[..., subprocess.Popen[str]], queue_url: str, tmp_path: Path
) -> None:
    (tmp_path / "proc_handlers.py").write_text("def handle(event):\n    pass\n")
    proc = popen("worker", "proc_handlers:handle", "--url", queue_url, "--processes", "2")
    assert proc.stderr is not None
    seen: list[str] = []
    while sum("started on queue" in line for line in seen) < 2:
        line = proc.stderr.readline()
        assert line, "".join(seen)
        seen.append(line)
    children = _started_pids("".join(seen))
    assert len(children) == 2
    proc.kill()
    proc.communicate()
    _wait_for("the worker processes to stop", lambda: all(_gone(pid) for pid in children))


def _two_free_ports() -> int:
    """Return a port P such that P and P + 1 are both free on 127.0.0.1 right now."""
    for _ in range(50):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port: int = first.getsockname()[1]
            if port >= 65_535:
                continue
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
                return port
    raise AssertionError("no two consecutive free ports")


def _acked_on(port: int, queue: str) -> float | None:
    """Return the acked count port *port* serves for *queue*; None if it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except (OSError, http.client.HTTPException):
        # Not listening yet: refused, or (a port of the ephemeral range) our own request read
        # back through a TCP self-connection, which http.client calls a bad status line.
        return None
    pattern = rf'pgque_worker_messages_total\{{(?=[^}}]*outcome="acked")(?=[^}}]*queue="{queue}")'
    for line in text.splitlines():
        if re.match(pattern, line):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_each_process_serves_its_metrics_on_its_own_port(
    popen: Callable[..., subprocess.Popen[str]], queue_url: str, tmp_path: Path
) -> None:
    _write_handlers(tmp_path, "def handle(event):\n    pass\n")
    queue = queue_url.rsplit("=", 1)[1]
    port = _two_free_ports()
    total = 40
    with connect(queue_url) as transport:
        transport.publish_many([(f"g{n}", Event(kind="job")) for n in range(total)])
        proc = popen(
            "worker", "proc_handlers:handle", "--url", queue_url, "--processes", "2",
            "--prometheus-port", str(port),
        )  # fmt: skip
        counts: list[float | None] = [None, None]

        def both_serve_everything() -> bool:
            assert proc.poll() is None, proc.communicate()
            counts[:] = [_acked_on(port, queue), _acked_on(port + 1, queue)]
            return None not in counts and sum(c or 0.0 for c in counts) == total

        _wait_for("both endpoints to count every message", both_serve_everything)
        assert transport.stats().messages == 0
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 0, err
    for where in (port, port + 1):
        assert f"serving Prometheus metrics on http://127.0.0.1:{where}/metrics" in err
    assert json.loads(out.strip())["acked"] == total


def test_processes_refuse_a_memory_queue(pgque: Run, tmp_path: Path) -> None:
    _write_handlers(tmp_path, "def handle(event):\n    pass\n")
    result = pgque("worker", "proc_handlers:handle", "--url", "memory://", "--processes", "2")
    assert result.returncode == 2, result
    assert result.stderr.strip() == (
        "pgque: error: --processes needs a queue on a server: a memory:// queue lives inside "
        "one process (use postgresql://... or redis://...)"
    )


def test_named_processes_are_live_workers_of_their_own(
    pgque: Run, queue_url: str, tmp_path: Path
) -> None:
    """With --name, each process of --processes is a worker named NAME-SLOT: while both run a
    message, the queue lists both (one row each), and each says goodbye on stopping."""
    seen = tmp_path / "workers.txt"
    _write_handlers(
        tmp_path,
        f"""
        import time
        from pgque.core import connect

        def handle(event):
            with connect({queue_url!r}) as transport:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    busy = sorted(w.id for w in transport.workers() if w.slots_busy)
                    if len(busy) == 2:
                        break
                    time.sleep(0.05)
            with open({str(seen)!r}, "a") as fh:
                fh.write(" ".join(busy) + "\\n")
        """,
    )
    with connect(queue_url) as transport:
        transport.publish_many([(f"g{g}", Event(kind="k")) for g in range(2)])
        result = pgque(
            "worker", "proc_handlers:handle", "--url", queue_url, "--processes", "2",
            "--name", "billing", "--heartbeat-every", "0.1", "--stop-when-idle",
            timeout=DEADLINE_S,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert isinstance(transport, SupportsWorkers)
        assert transport.workers() == []
    assert _lines(seen) == [["billing-1", "billing-2"]] * 2
