"""Operator commands against a real PostgreSQL, through the console script.

``memory://`` cannot carry state from one ``pgque`` process to the next, so publish, stats,
dead letters, unblock and the worker are tested where state persists. Each test sets up and
verifies through a transport in this process and runs the script only for what it tests
(a ``pgque`` start costs about a second on a busy machine).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from pgque.core import Event, Transport, connect

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def queue_url(postgres_url: str) -> str:
    """Return the server's URL with a fresh queue name."""
    sep = "&" if "?" in postgres_url else "?"
    return f"{postgres_url}{sep}queue=cli_{uuid.uuid4().hex[:12]}"


def _blocked(url: str) -> Transport:
    """Publish one message into group "stuck" and exhaust it so that the group is blocked."""
    transport = connect(url, max_attempts=1, on_exhausted="block")
    transport.publish("stuck", Event(kind="job", data={"n": 1}))
    lease = transport.claim()
    assert lease is not None
    assert transport.nack(lease)
    assert transport.claim() is None
    assert transport.stats().blocked == 1
    return transport


def _dead_letter(url: str) -> tuple[Transport, int]:
    transport = connect(url)
    transport.publish("failed", Event(kind="job"))
    lease = transport.claim()
    assert lease is not None
    assert transport.dead_letter(lease, "boom")
    (letter,) = transport.dead_letters()
    return transport, letter.id


def test_publish(pgque: Run, queue_url: str) -> None:
    first = pgque("publish", "g1", "order.paid", '{"amount": 12.5}', "-p", "3", "--url", queue_url)
    assert first.returncode == 0, first.stderr
    second = pgque("publish", "g1", "x", "-", "-H", "trace=abc", "--url", queue_url, stdin="[1]")
    assert second.returncode == 0, second.stderr
    assert int(first.stdout) < int(second.stdout)
    with connect(queue_url) as transport:
        lease = transport.claim()
        assert lease is not None
        assert (lease.event.kind, lease.event.data, lease.priority) == (
            "order.paid",
            {"amount": 12.5},
            3,
        )
        assert transport.ack(lease)
        lease = transport.claim()
        assert lease is not None
        assert (lease.event.data, lease.event.headers) == ([1], {"trace": "abc"})


def test_stats_json_and_table_show_blocked_groups(pgque: Run, queue_url: str) -> None:
    with _blocked(queue_url) as transport:
        transport.publish("other", Event(kind="job"))
    result = pgque("stats", "--json", "--url", queue_url)
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert (stats["groups"], stats["messages"], stats["blocked"], stats["in_flight"]) == (
        2,
        2,
        1,
        0,
    )
    assert stats["queue"] == queue_url.rsplit("=", 1)[1]
    table = pgque("stats", "--url", queue_url)
    assert table.returncode == 0, table.stderr
    for label in ("groups", "parked", "blocked", "dead letters", "next resume"):
        assert label in table.stdout


def test_unblock_retries_the_head(pgque: Run, queue_url: str) -> None:
    with _blocked(queue_url) as transport:
        result = pgque("unblock", "stuck", "--url", queue_url)
        assert result.returncode == 0, result.stderr
        assert "retried" in result.stdout
        lease = transport.claim()
        assert lease is not None
        assert lease.group_id == "stuck"


def test_unblock_drop_head_and_not_blocked(
    pgque: Run, queue_url: str, error_line: Callable[..., str]
) -> None:
    with _blocked(queue_url) as transport:
        result = pgque("unblock", "stuck", "--drop-head", "--url", queue_url)
        assert result.returncode == 0, result.stderr
        assert "moved to the dead letters" in result.stdout
        assert [d.reason for d in transport.dead_letters()] == ["dropped by operator (unblock)"]
    assert "not blocked" in error_line(pgque("unblock", "stuck", "--url", queue_url))


def test_dead_letters_list(pgque: Run, queue_url: str) -> None:
    transport, letter_id = _dead_letter(queue_url)
    with transport:
        listed = pgque("dead-letters", "list", "--json", "--url", queue_url)
        assert listed.returncode == 0, listed.stderr
        letters = [json.loads(line) for line in listed.stdout.splitlines()]
        assert [(d["id"], d["group_id"], d["reason"]) for d in letters] == [
            (letter_id, "failed", "boom")
        ]
        table = pgque("dead-letters", "list", "--url", queue_url)
        assert "failed" in table.stdout
        assert "boom" in table.stdout


def test_dead_letters_redrive(pgque: Run, queue_url: str, error_line: Callable[..., str]) -> None:
    transport, letter_id = _dead_letter(queue_url)
    with transport:
        assert "IDS or --all" in error_line(pgque("dead-letters", "redrive", "--url", queue_url))
        result = pgque("dead-letters", "redrive", str(letter_id), "--url", queue_url)
        assert result.stdout.strip() == "redrove 1 dead letter in place"
        stats = transport.stats()
        assert (stats.messages, stats.dead_letters) == (1, 0)
        lease = transport.claim()
        assert lease is not None
        assert (lease.group_id, lease.attempt) == ("failed", 1)
        assert transport.ack(lease)
        transport.publish("failed", Event(kind="job"))
        lease = transport.claim()
        assert lease is not None
        assert transport.dead_letter(lease, "again")
        (letter,) = transport.dead_letters()
        result = pgque("dead-letters", "redrive", "--all", "--tail", "--url", queue_url)
        assert result.stdout.strip() == "re-published 1 dead letter at the tail"
        lease = transport.claim()
        assert lease is not None
        assert lease.message_id > letter.message_id  # a new message


def test_worker_runs_a_handler_until_idle(pgque: Run, queue_url: str, tmp_path: Path) -> None:
    out = tmp_path / "seen.txt"
    (tmp_path / "cli_handlers.py").write_text(
        textwrap.dedent(
            f"""
            def handle(event, lease):
                with open({str(out)!r}, "a") as fh:
                    fh.write(f"{{lease.group_id}} {{event.data['n']}}\\n")
            """
        )
    )
    with connect(queue_url) as transport:
        transport.publish_many([("g", Event(kind="step", data={"n": n})) for n in range(3)])
        result = pgque(
            "worker", "cli_handlers:handle", "--url", queue_url, "--stop-when-idle", "-c", "2"
        )
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout.strip().splitlines()[-1])
        assert report["acked"] == 3
        assert out.read_text().splitlines() == ["g 0", "g 1", "g 2"]
        assert transport.stats().messages == 0


def test_worker_stops_gracefully_on_sigint(
    queue_url: str, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    (tmp_path / "cli_idle.py").write_text("def handle(event):\n    pass\n")
    script = str(Path(sys.executable).parent / "pgque")
    proc = subprocess.Popen(
        [script, "worker", "cli_idle:handle", "--url", queue_url, "--log-level", "INFO"],
        cwd=tmp_path,
        env=clean_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 30
        seen = ""
        while "started" not in seen and time.monotonic() < deadline:
            seen = proc.stderr.readline()
            assert seen or proc.poll() is None, "the worker exited early"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err  # stopped by Ctrl-C, as a shell reports it
    assert json.loads(out.strip().splitlines()[-1])["acked"] == 0
    assert "Traceback" not in err


def test_groups_and_group_explain_a_blocked_group(pgque: Run, queue_url: str) -> None:
    with _blocked(queue_url) as transport:
        transport.publish("other", Event(kind="job"))
        listed = pgque("groups", "--state", "blocked", "--json", "--url", queue_url)
        assert listed.returncode == 0, listed.stderr
        rows = [json.loads(line) for line in listed.stdout.splitlines()]
        assert [(r["group_id"], r["state"], r["head_attempts"]) for r in rows] == [
            ("stuck", "blocked", 1)
        ]
        table = pgque("groups", "--url", queue_url)
        assert table.returncode == 0, table.stderr
        assert max(len(line) for line in table.stdout.splitlines()) <= 80
        shown = pgque("group", "stuck", "--url", queue_url)
        assert shown.returncode == 0, shown.stderr
        why = shown.stdout.strip().splitlines()[-1]
        assert why.startswith("blocked: max_attempts (1) exhausted (no error was recorded) — ")
        assert "run `pgque unblock stuck`" in why


def test_pause_and_resume_hold_a_group_across_processes(pgque: Run, queue_url: str) -> None:
    paused = pgque("pause", "tenant-42", "--url", queue_url)
    assert paused.returncode == 0, paused.stderr
    with connect(queue_url) as transport:
        transport.publish("tenant-42", Event(kind="job"))
        assert transport.claim() is None
        info = transport.group("tenant-42")
        assert info is not None
        assert (info.state, info.depth) == ("paused", 1)
        resumed = pgque("resume", "tenant-42", "--url", queue_url)
        assert (resumed.returncode, resumed.stdout.strip()) == (0, "resumed tenant-42")
        lease = transport.claim()
        assert lease is not None
        assert lease.group_id == "tenant-42"


def test_dead_letters_show_and_delete(
    pgque: Run, queue_url: str, error_line: Callable[..., str]
) -> None:
    with connect(queue_url) as transport:
        transport.publish("failed", Event(kind="job"))
        lease = transport.claim()
        assert lease is not None
        try:
            raise ValueError("bad sku")
        except ValueError as exc:
            recorded = transport.dead_letter(lease, "rejected", error=exc)
        assert recorded
        (letter,) = transport.dead_letters()
        shown = pgque("dead-letters", "show", str(letter.id), "--url", queue_url)
        assert shown.returncode == 0, shown.stderr
        assert "Traceback (most recent call last)" in shown.stdout
        assert "ValueError: bad sku" in shown.stdout
        deleted = pgque("dead-letters", "delete", str(letter.id), "--url", queue_url)
        assert (deleted.returncode, deleted.stdout.strip()) == (0, "deleted 1 dead letter")
        assert transport.dead_letters() == []
        assert "has none" in error_line(
            pgque("dead-letters", "delete", str(letter.id), "--url", queue_url)
        )
