"""The command line never surprises: through the real console script, on every backend.

``pgque queues`` lists what a server holds; ``stats`` on a queue never used says so;
queue names users pick work; errors are one line with usage errors at exit 2; an import error
of a worker's module shows its traceback on request; tables fit 80 columns; JSON timestamps are
one format; a refused connection fails at once while a starting server is waited for.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pgque.core import Event, connect

Run = Callable[..., subprocess.CompletedProcess[str]]
Check = Callable[[subprocess.CompletedProcess[str]], str]

#: The queue names of the issue, purged before and after each test that uses them.
NAMES = ["orders-v2", "Billing.EU"]
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$")


@pytest.fixture(params=["postgres", "redis"])
def server_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """Return the URL of a test server, with the issue's queue names purged around the test."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    _purge(url)
    yield url
    _purge(url)


def _purge(url: str) -> None:
    for name in NAMES:
        with connect(url, queue=name) as transport:
            transport.purge()  # type: ignore[attr-defined]


def test_queues_lists_every_queue_with_its_counts(pgque: Run, server_url: str) -> None:
    with (
        connect(server_url, queue="orders-v2") as orders,
        connect(server_url, queue="Billing.EU") as billing,
    ):
        orders.publish("g1", Event(kind="order.created"))
        orders.publish("g2", Event(kind="order.created"))
        billing.publish("eu-1", Event(kind="invoice.sent"))
        lease = billing.claim()
        assert lease is not None
        assert billing.dead_letter(lease, "bad")
        result = pgque("queues", "--url", server_url, "--json")
        assert result.returncode == 0, result.stderr
        rows = {row["queue"]: row for row in map(json.loads, result.stdout.splitlines())}
        assert rows["orders-v2"]["groups"] == 2
        assert rows["orders-v2"]["messages"] == 2
        assert rows["Billing.EU"]["messages"] == 0
        assert rows["Billing.EU"]["dead_letters"] == 1
        table = pgque("queues", "--url", server_url)
        assert table.returncode == 0, table.stderr
        assert "orders-v2" in table.stdout
        assert "Billing.EU" in table.stdout
        assert max(len(line) for line in table.stdout.splitlines()) <= 80


def test_queues_on_memory_is_empty_and_says_so(pgque: Run) -> None:
    result = pgque("queues", "--url", "memory://")
    assert result.returncode == 0, result.stderr
    assert "no queues" in result.stderr


def test_user_queue_names_end_to_end(pgque: Run, server_url: str) -> None:
    for name in NAMES:
        published = pgque("publish", "g", "k.x", '{"n": 1}', "--url", server_url, "-q", name)
        assert published.returncode == 0, published.stderr
        stats = pgque("stats", "--url", server_url, "--queue", name, "--json")
        assert stats.returncode == 0, stats.stderr
        assert json.loads(stats.stdout)["messages"] == 1
        with connect(server_url, queue=name) as transport:
            lease = transport.claim()
            assert lease is not None
            assert lease.event.data == {"n": 1}
            assert transport.ack(lease)


@pytest.mark.parametrize("name", ["-orders", "orders v2", "orders:v2", "o" * 65, "Bill{ing}"])
def test_names_outside_the_grammar_are_refused(pgque: Run, error_line: Check, name: str) -> None:
    for url in ("memory://", "postgresql://127.0.0.1:9/x", "redis://127.0.0.1:9/0"):
        result = pgque("stats", "--url", url, "--queue", name)
        assert "invalid queue name" in error_line(result)


def test_stats_of_a_queue_that_does_not_exist_says_so(
    pgque: Run, server_url: str, error_line: Check
) -> None:
    result = pgque("stats", "--url", server_url, "--queue", "never-made-0xq1")
    line = error_line(result)
    assert result.returncode == 1
    assert "queue 'never-made-0xq1' has never been used" in line
    assert "the queues there: " in line or "no queue there holds anything yet" in line


def test_json_timestamps_are_one_iso_format(pgque: Run, postgres_url: str) -> None:
    with connect(postgres_url, queue="orders-v2") as transport:
        transport.purge()  # type: ignore[attr-defined]
        transport.publish("g", Event(kind="k"))
        lease = transport.claim()
        assert lease is not None
        assert transport.dead_letter(lease, "bad")
        transport.publish("parked", Event(kind="k"))
        lease = transport.claim()
        assert lease is not None
        assert transport.nack(lease, delay=600)
        try:
            letters = pgque(
                "dead-letters", "list", "--url", postgres_url, "-q", "orders-v2", "--json"
            )
            assert letters.returncode == 0, letters.stderr
            (letter,) = map(json.loads, letters.stdout.splitlines())
            assert ISO_UTC.match(letter["failed_at"]), letter
            assert ISO_UTC.match(letter["event"]["created_at"]), letter
            stats = pgque("stats", "--url", postgres_url, "-q", "orders-v2", "--json")
            assert ISO_UTC.match(json.loads(stats.stdout)["next_resume_at"]), stats.stdout
        finally:
            transport.purge()  # type: ignore[attr-defined]


def test_dead_letter_table_fits_80_columns_without_breaking_words(
    pgque: Run, redis_url: str
) -> None:
    with connect(redis_url, queue="orders-v2") as transport:
        transport.purge()  # type: ignore[attr-defined]
        transport.publish("customer-eu-000123-order-7", Event(kind="order.created"))
        lease = transport.claim()
        reason = "card declined by the issuing bank after three retries (code 51)"
        assert lease is not None
        assert transport.dead_letter(lease, reason)
        try:
            result = pgque("dead-letters", "list", "--url", redis_url, "-q", "orders-v2")
        finally:
            transport.purge()  # type: ignore[attr-defined]
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any("order.created" in line for line in lines)
    assert any("customer-eu-000123-order-7" in line for line in lines)
    words = set(" ".join(lines).split())
    assert {"declined", "issuing", "retries"} <= words  # wrapped between words only


def test_a_bad_header_is_a_usage_error(pgque: Run, error_line: Check) -> None:
    result = pgque("publish", "g", "k", "-H", "notaheader", "--url", "memory://")
    assert "--header must be KEY=VALUE" in error_line(result)
    assert result.returncode == 2


def test_an_invalid_event_is_one_human_line(pgque: Run, error_line: Check) -> None:
    result = pgque("publish", "g", "k", "--event-id", "", "--url", "memory://")
    line = error_line(result)
    assert result.returncode == 1
    assert line == "pgque: error: invalid event: id: String should have at least 1 character"


def test_an_invalid_setting_is_one_human_line(pgque: Run, error_line: Check) -> None:
    result = pgque("stats", "--url", "memory://", env={"PGQUE_MAX_ATTEMPTS": "lots"})
    line = error_line(result)
    assert "PGQUE_MAX_ATTEMPTS" in line
    assert "pydantic" not in line
    assert "validation error" not in line


def test_publish_to_memory_warns_that_the_message_is_gone(pgque: Run) -> None:
    result = pgque("publish", "g", "k", "--url", "memory://")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"
    assert "memory:// queue lives only in this process" in result.stderr


def test_a_worker_module_that_fails_to_import(
    pgque: Run, tmp_path: Path, error_line: Check
) -> None:
    (tmp_path / "broken_tasks.py").write_text("def handle(event):\n    pass\nundefined_name\n")
    plain = pgque("worker", "broken_tasks:handle", "--url", "memory://", cwd=tmp_path)
    line = error_line(plain)
    assert "cannot import 'broken_tasks': NameError" in line
    assert "--debug" in line
    for args, env in ((["--debug"], {}), ([], {"PGQUE_DEBUG": "1"})):
        result = pgque(
            "worker", "broken_tasks:handle", *args, "--url", "memory://", cwd=tmp_path, env=env
        )
        assert result.returncode == 1
        assert "Traceback (most recent call last)" in result.stderr
        assert 'broken_tasks.py", line 3' in result.stderr
        assert result.stderr.strip().splitlines()[-1].startswith("pgque: error: cannot import")


def test_bench_is_offered_only_with_its_harness(pgque: Run) -> None:
    pytest.importorskip("click")
    import importlib.util

    if importlib.util.find_spec("pgque_bench") is not None:
        pytest.skip("the benchmark harness is installed in this environment")
    listing = pgque("--help")
    assert listing.returncode == 0
    assert "bench" not in listing.stdout
    assert pgque("bench").returncode == 2


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("scheme", ["postgresql", "redis"])
def test_a_refused_connection_fails_at_once(pgque: Run, error_line: Check, scheme: str) -> None:
    port = _closed_port()
    url = (
        f"postgresql://u@127.0.0.1:{port}/x"
        if scheme == "postgresql"
        else f"redis://127.0.0.1:{port}/0"
    )
    started = time.monotonic()
    result = pgque("stats", "--url", url, "--connect-timeout", "30")
    elapsed = time.monotonic() - started
    assert "refused" in error_line(result).lower()
    assert elapsed < 10  # a start of pgque costs 1-2 s here; the wait would be 30 s


def test_a_postgres_server_still_starting_is_waited_for(pgque: Run, error_line: Check) -> None:
    """A fake server answers every connection with PostgreSQL's "starting up" refusal.

    (``pgque install`` waits too: pgque-postgres's test_pg_cli.py, beside its code.)
    """
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        port = server.getsockname()[1]
        seen: list[float] = []
        stop = threading.Event()

        def answer() -> None:
            server.settimeout(0.2)
            while not stop.is_set():
                try:
                    conn, _ = server.accept()
                except OSError:
                    continue
                with conn:
                    seen.append(time.monotonic())
                    conn.recv(8192)  # the SSLRequest or the startup packet
                    conn.sendall(_starting_up())

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        try:
            started = time.monotonic()
            result = pgque(
                "stats",
                "--url",
                f"postgresql://u@127.0.0.1:{port}/x?sslmode=disable",
                "--connect-timeout",
                "3",
            )
            elapsed = time.monotonic() - started
        finally:
            stop.set()
            thread.join()
    line = error_line(result)
    assert "starting up" in line
    assert "within 3 s" in line  # the transport says how long it waited
    assert len(seen) >= 3  # it came back several times
    assert seen[-1] - seen[0] >= 2.0
    assert elapsed < 15


def _starting_up() -> bytes:
    """Return the ErrorResponse a PostgreSQL server sends while it starts (SQLSTATE 57P03)."""
    fields = b"SFATAL\x00VFATAL\x00C57P03\x00Mthe database system is starting up\x00\x00"
    return b"E" + (len(fields) + 4).to_bytes(4, "big") + fields
