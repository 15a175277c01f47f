"""``pgque dashboard``: the real console script serving a PostgreSQL queue over HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx2 as httpx
import pytest

from pgque.core import Event, connect

Run = Callable[..., subprocess.CompletedProcess[str]]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def serve(clean_env: dict[str, str]) -> Iterator[Callable[..., tuple[str, subprocess.Popen[str]]]]:
    """Start ``pgque dashboard ARGS`` on a free port; return its base URL and process."""
    started: list[subprocess.Popen[str]] = []
    script = os.path.join(os.path.dirname(sys.executable), "pgque")

    def start(*args: str, env: dict[str, str] | None = None) -> tuple[str, subprocess.Popen[str]]:
        port = _free_port()
        process = subprocess.Popen(
            [script, "dashboard", *args, "--port", str(port)],
            env={**clean_env, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        host = args[args.index("--host") + 1] if "--host" in args else "127.0.0.1"
        base = f"http://{host}:{port}"
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, process.communicate()
            try:
                httpx.get(base + "/static/favicon.svg", timeout=1)
                return base, process
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the dashboard did not answer in 30 s"
                time.sleep(0.1)

    yield start
    for process in started:
        process.terminate()
        process.communicate(timeout=20)


def test_dashboard_serves_a_postgres_queue_read_only_behind_its_token(
    postgres_url: str, serve: Callable[..., tuple[str, subprocess.Popen[str]]]
) -> None:
    queue = f"cli_dash_{uuid.uuid4().hex[:10]}"
    with connect(postgres_url, queue=queue) as transport:
        transport.publish("tenant/1", Event(kind="k"))
    try:
        base, process = serve("--url", postgres_url, env={"PGQUE_DASHBOARD_TOKEN": "tok"})
        assert httpx.get(base + "/api/queues").status_code == 401
        bearer = {"Authorization": "Bearer tok"}
        listed = httpx.get(base + "/api/queues", headers=bearer).json()["queues"]
        assert {"queue": queue, "messages": 1} in [
            {"queue": q["queue"], "messages": q["messages"]} for q in listed
        ]
        group = httpx.get(f"{base}/api/queues/{queue}/groups/tenant%2F1", headers=bearer)
        assert group.json()["group_id"] == "tenant/1"
        page = httpx.get(f"{base}/queues/{queue}/groups/tenant%2F1", headers=bearer)
        assert 'method="post"' not in page.text
        refused = httpx.post(
            f"{base}/queues/{queue}/actions/pause", data={"group": "tenant/1"}, headers=bearer
        )
        assert refused.status_code == 403
        process.terminate()
        _out, err = process.communicate(timeout=20)
        assert "on http://127.0.0.1:" in err
        assert "(read-only)" in err
    finally:
        with connect(postgres_url, queue=queue) as transport:
            transport.purge()  # type: ignore[attr-defined]


def test_dashboard_refuses_a_memory_queue_in_one_line(
    pgque: Run, error_line: Callable[[subprocess.CompletedProcess[str]], str]
) -> None:
    line = error_line(pgque("dashboard", "--url", "memory://"))
    assert "memory://" in line
    assert "create_app(transports=" in line


def test_dashboard_refuses_an_empty_token(
    pgque: Run, error_line: Callable[[subprocess.CompletedProcess[str]], str], postgres_url: str
) -> None:
    line = error_line(pgque("dashboard", "--url", postgres_url, env={"PGQUE_DASHBOARD_TOKEN": " "}))
    assert "token is empty" in line


def test_dashboard_help_names_its_options(pgque: Run) -> None:
    result = pgque("dashboard", "--help")
    assert result.returncode == 0
    for option in (
        "--url",
        "--host",
        "--port",
        "--allow-actions",
        "--token",
        "PGQUE_DASHBOARD_TOKEN",
        "--allowed-host",
        "--schedule",
    ):
        assert option in result.stdout
    assert "127.0.0.1" in result.stdout


def test_dashboard_serves_the_queue_metrics_behind_its_token(
    postgres_url: str, serve: Callable[..., tuple[str, subprocess.Popen[str]]]
) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    queue = f"cli_dash_{uuid.uuid4().hex[:10]}"
    with connect(postgres_url, queue=queue) as transport:
        transport.publish("a", Event(kind="k"))
        transport.publish("b", Event(kind="k"))
        try:
            base, _ = serve("--url", postgres_url, env={"PGQUE_DASHBOARD_TOKEN": "tok"})
            assert httpx.get(base + "/metrics").status_code == 401
            answer = httpx.get(base + "/metrics", headers={"Authorization": "Bearer tok"})
            assert answer.status_code == 200
            values = {
                (sample.name, sample.labels.get("queue")): sample.value
                for family in text_string_to_metric_families(answer.text)
                for sample in family.samples
            }
            assert values[("pgque_messages", queue)] == 2
            assert values[("pgque_up", queue)] == 1
        finally:
            transport.purge()  # type: ignore[attr-defined]


def test_dashboard_serves_the_loopback_names_its_host_and_each_allowed_host_only(
    postgres_url: str, serve: Callable[..., tuple[str, subprocess.Popen[str]]]
) -> None:
    # 127.0.0.2 is this machine too (the loopback network is 127.0.0.0/8).
    base, process = serve(
        "--url",
        postgres_url,
        "--host",
        "127.0.0.2",
        "--allowed-host",
        "dash.example",
        "--allowed-host",
        "[fd00::7]",
    )
    port = base.rsplit(":", 1)[1]
    for host in (
        f"127.0.0.2:{port}",
        f"127.0.0.1:{port}",
        f"localhost:{port}",
        "[::1]",
        f"dash.example:{port}",
        "DASH.example",
        "[fd00::7]:443",
    ):
        answer = httpx.get(base + "/api/queues", headers={"Host": host})
        assert answer.status_code == 200, host
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.3", "dash.example.evil"):
        refused = httpx.get(base + "/api/queues", headers={"Host": host})
        assert refused.status_code == 400, host
        assert "--allowed-host" in refused.text
    # A write another site sent is refused before its CSRF token is even read.
    cross = httpx.post(f"{base}/queues/x/actions/pause", headers={"Origin": "http://evil.example"})
    assert cross.status_code == 403
    process.terminate()
    _out, err = process.communicate(timeout=20)
    assert "without --token" in err  # 127.0.0.2 is not one of the loopback names


def test_dashboard_refuses_an_allowed_host_that_is_no_host_name(
    pgque: Run, error_line: Callable[[subprocess.CompletedProcess[str]], str], postgres_url: str
) -> None:
    result = pgque("dashboard", "--url", postgres_url, "--allowed-host", "dash.example:8000")
    assert result.returncode != 0
    assert "dash.example:8000" in error_line(result)


_BEAT = """
from pgque.core.scheduling import Schedule, ScheduleEntry

schedule = Schedule([ScheduleEntry(name="nightly", cron="30 2 * * *", group_id="r", kind="k")])
other = Schedule([ScheduleEntry(name="hourly", cron="@hourly", group_id="h", kind="k")])
"""


def test_dashboard_shows_the_schedules_given_with_their_last_tick(
    postgres_url: str,
    serve: Callable[..., tuple[str, subprocess.Popen[str]]],
    tmp_path: Path,
) -> None:
    (tmp_path / "beatmod.py").write_text(_BEAT)
    queue = f"cli_dash_{uuid.uuid4().hex[:10]}"
    with connect(postgres_url, queue=queue) as transport:
        assert transport.publish_tick("nightly", 1_700_000_000.0, "r", Event(kind="k"))
        try:
            base, _ = serve(
                "--url",
                postgres_url,
                "--schedule",
                "beatmod:schedule",
                "--schedule",
                "beatmod:other",
                env={"PYTHONPATH": str(tmp_path)},
            )
            page = httpx.get(f"{base}/queues/{queue}/schedules")
            assert page.status_code == 200
            assert "beatmod:schedule" in page.text
            assert "beatmod:other" in page.text
            nightly = page.text.split('data-entry="nightly"')[1].split("</tr>")[0]
            assert "2023-11-14T22:13:20Z" in nightly
            hourly = page.text.split('data-entry="hourly"')[1].split("</tr>")[0]
            assert "never" in hourly
        finally:
            transport.purge()  # type: ignore[attr-defined]


def test_dashboard_refuses_a_schedule_it_cannot_load_in_one_line(
    pgque: Run,
    error_line: Callable[[subprocess.CompletedProcess[str]], str],
    postgres_url: str,
    tmp_path: Path,
) -> None:
    (tmp_path / "beatmod.py").write_text(_BEAT + "\nnot_one = 42\n")
    for spec, said in (("beatmod:not_one", "not a pgque.core.Schedule"), ("nomod:x", "nomod")):
        line = error_line(pgque("dashboard", "--url", postgres_url, "--schedule", spec))
        assert said in line, line


def test_dashboard_without_the_asyncio_postgres_package_serves_in_threads(
    postgres_url: str,
    serve: Callable[..., tuple[str, subprocess.Popen[str]]],
    tmp_path: Path,
) -> None:
    # As if pgque-postgres-async were not installed (see that file).
    absent = Path(__file__).parents[1] / "routes" / "_no_async_postgres.py"
    (tmp_path / "sitecustomize.py").write_text(absent.read_text())
    queue = f"cli_dash_{uuid.uuid4().hex[:10]}"
    with connect(postgres_url, queue=queue) as transport:
        transport.publish("tenant/1", Event(kind="k"))
        try:
            base, process = serve("--url", postgres_url, env={"PYTHONPATH": str(tmp_path)})
            listed = httpx.get(base + "/api/queues")
            assert listed.status_code == 200, listed.text
            assert queue in [q["queue"] for q in listed.json()["queues"]]
            page = httpx.get(f"{base}/queues/{queue}/groups/tenant%2F1")
            assert page.status_code == 200
            process.terminate()
            _out, err = process.communicate(timeout=20)
            notes = [line for line in err.splitlines() if "pgque-postgres-async" in line]
            assert len(notes) == 1, err
            assert notes[0].startswith("pgque: note: ")
            assert "pip install pgque-postgres-async" in notes[0]
        finally:
            transport.purge()  # type: ignore[attr-defined]
