"""``pgque install`` and ``pgque migrate``, which this package adds to the ``pgque`` command line
(entry-point group ``pgque.cli_commands``), through the real console script.

pgque-core's own command-line tests cover the other commands and the contribution mechanism;
these moved here with the commands' code.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from pgque.core import Backend
from pgque.postgres import LATEST_VERSION, PostgresBackend
from pgque.postgres_async import AsyncPostgresBackend


def _pgque(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the console script installed next to this interpreter, without PGQUE_* settings."""
    script = Path(sys.executable).parent / "pgque"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGQUE_")}
    return subprocess.run(
        [str(script), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )


def _error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("pgque: error: "), result.stderr
    return lines[0]


def test_the_commands_are_contributed_through_the_entry_point_group(tmp_path: Path) -> None:
    contributed = {ep.name: ep.value for ep in entry_points(group="pgque.cli_commands")}
    assert contributed["install"] == "pgque.postgres._cli:install_command"
    assert contributed["migrate"] == "pgque.postgres._cli:migrate_command"
    listing = _pgque("--help", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    commands = listing.stdout.split("Commands:", 1)[1]
    assert "install       Create the pgque schema in a PostgreSQL database" in commands
    assert "migrate       Upgrade the pgque schema in a PostgreSQL database" in commands


@pytest.mark.parametrize("command", ["install", "migrate"])
def test_every_command_has_help(command: str, tmp_path: Path) -> None:
    result = _pgque(command, "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Usage: pgque {command}"), result.stdout
    assert "--create-roles" in result.stdout
    assert result.stderr == ""


def test_install_and_migrate_are_idempotent(postgres_url: str, tmp_path: Path) -> None:
    result = _pgque("install", "--url", postgres_url, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "pgque schema" in result.stdout
    result = _pgque("migrate", "--url", postgres_url, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "nothing to do" in result.stdout
    assert f"already at version {LATEST_VERSION}" in result.stdout


@pytest.mark.parametrize("command", ["install", "migrate"])
@pytest.mark.parametrize("url", ["memory://", "redis://127.0.0.1:1/0"])
def test_install_on_a_backend_without_schema(command: str, url: str, tmp_path: Path) -> None:
    result = _pgque(command, "--url", url, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    scheme = url.split(":", 1)[0]
    assert result.stdout.strip() == (
        f"nothing to {command} for {scheme}://: this backend keeps no schema"
    )


def test_install_waits_for_a_server_still_starting(tmp_path: Path) -> None:
    """A fake server answers every connection with PostgreSQL's "starting up" refusal."""
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
            url = f"postgresql://u@127.0.0.1:{port}/x?sslmode=disable"
            result = _pgque("install", "--url", url, "--connect-timeout", "3", cwd=tmp_path)
            elapsed = time.monotonic() - started
        finally:
            stop.set()
            thread.join()
    line = _error_line(result)
    assert "starting up" in line
    assert result.returncode == 1
    assert len(seen) >= 3  # it came back several times
    assert seen[-1] - seen[0] >= 2.0
    assert elapsed < 15


def _starting_up() -> bytes:
    """Return the ErrorResponse a PostgreSQL server sends while it starts (SQLSTATE 57P03)."""
    fields = b"SFATAL\x00VFATAL\x00C57P03\x00Mthe database system is starting up\x00\x00"
    return b"E" + (len(fields) + 4).to_bytes(4, "big") + fields


@pytest.mark.parametrize("backend", [PostgresBackend, AsyncPostgresBackend], ids=["sync", "async"])
def test_a_one_off_command_waits_and_fails_fast_on_refusal(backend: Backend) -> None:
    """What ``pgque`` passes to a transport it opens for one command (``--connect-timeout``)."""
    command_options = backend.command_options
    assert command_options is not None
    assert command_options(3.0, True) == {"timeout": 3.0, "retry_refused": False}
    assert command_options(3.0, False) == {"timeout": 3.0}  # a worker rides out a restart
