"""``pgque dashboard``, ``pgque metrics`` and ``pgque worker --prometheus-port`` come with
pgque-dashboard, through the command line's plug-in entry points: there when it is installed,
and one line naming the package to install (exit 2, a usage error) when it is not.

"Not installed" is made in a subprocess by a ``sitecustomize`` (``_no_dashboard.py``) that
hides the distribution's entry points and its import.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from pgque.core.cli.commands import ENTRY_POINT_GROUP, WORKER_EXPORTERS_GROUP

Run = Callable[..., subprocess.CompletedProcess[str]]
Check = Callable[[subprocess.CompletedProcess[str]], str]

#: What `pgque --help` says of a command whose distribution is missing.
STAND_IN = "Needs pgque-dashboard (not installed)"


@pytest.fixture
def without_dashboard(tmp_path: Path) -> dict[str, str]:
    """Return the environment of a console script that does not see pgque-dashboard."""
    site = tmp_path / "site"
    site.mkdir()
    hiding = Path(__file__).with_name("_no_dashboard.py").read_text(encoding="utf-8")
    (site / "sitecustomize.py").write_text(hiding, encoding="utf-8")
    return {"PYTHONPATH": str(site)}


def _handler_module(folder: Path) -> None:
    (folder / "cli_quiet.py").write_text("def handle(event):\n    pass\n", encoding="utf-8")


def test_the_commands_are_the_entry_points_of_pgque_dashboard() -> None:
    commands = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert commands["dashboard"] == "pgque.dashboard._cli:dashboard_command"
    assert commands["metrics"] == "pgque.dashboard._cli:metrics_command"
    (exporter,) = entry_points(group=WORKER_EXPORTERS_GROUP, name="prometheus")
    assert exporter.value == "pgque.dashboard.metrics:serve_worker_metrics"


def test_installed_the_commands_are_listed_and_run(pgque: Run) -> None:
    listing = pgque("--help")
    assert listing.returncode == 0, listing.stderr
    listed = listing.stdout.split("Commands:", 1)[1]
    assert "dashboard     Serve the web dashboard" in listed
    assert "metrics       Serve queue metrics for Prometheus" in listed
    assert STAND_IN not in listed
    for command in ("dashboard", "metrics"):
        helped = pgque(command, "--help")
        assert helped.returncode == 0, helped.stderr
        assert helped.stdout.startswith(f"Usage: pgque {command} [OPTIONS]")
    refused = pgque("metrics", "--url", "memory://", "--top-k", "101")
    assert refused.returncode == 2  # the real command's own option checks
    assert "--top-k" in refused.stderr


def test_installed_the_worker_serves_its_metrics(pgque: Run, tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        _handler_module(tmp_path)
        result = pgque(
            "worker", "cli_quiet:handle", "--url", "memory://", "--stop-when-idle",
            "--prometheus-port", str(port),
        )  # fmt: skip
    # The exporter was found and tried the port: the one line is about the port, not a package.
    assert result.returncode == 1, result
    assert f"cannot serve metrics on 127.0.0.1:{port}: Address already in use" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["dashboard", "--url", "postgresql://localhost/app"],
        ["dashboard", "--help"],
        ["metrics", "--url", "memory://", "--port", "0"],
        ["metrics"],
    ],
    ids=["dashboard", "dashboard-help", "metrics", "metrics-bare"],
)
def test_missing_a_command_names_the_package_in_one_line(
    pgque: Run, error_line: Check, without_dashboard: dict[str, str], args: list[str]
) -> None:
    result = pgque(*args, env=without_dashboard)
    line = error_line(result)
    assert result.returncode == 2, result
    assert line.startswith(
        f"pgque: error: pgque {args[0]} comes with pgque-dashboard, which is not installed; run: "
        "pip install pgque-dashboard"
    ), line


def test_missing_the_commands_are_listed_as_needing_it(
    pgque: Run, without_dashboard: dict[str, str]
) -> None:
    listing = pgque("--help", env=without_dashboard)
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.split("Commands:", 1)[1].splitlines()
    for command in ("dashboard", "metrics"):
        (line,) = [s for s in lines if s.split()[:1] == [command]]
        assert STAND_IN in line, line


def test_missing_the_worker_exporter_names_the_package_in_one_line(
    pgque: Run, error_line: Check, without_dashboard: dict[str, str], tmp_path: Path
) -> None:
    _handler_module(tmp_path)
    result = pgque(
        "worker", "cli_quiet:handle", "--url", "memory://", "--prometheus-port", "9",
        env=without_dashboard,
    )  # fmt: skip
    line = error_line(result)
    assert result.returncode == 2, result
    assert line.startswith(
        "pgque: error: --prometheus-port needs pgque-dashboard (the Prometheus exporter), which "
        "is not installed; run: pip install pgque-dashboard"
    ), line
    plain = pgque(
        "worker", "cli_quiet:handle", "--url", "memory://", "--stop-when-idle",
        env=without_dashboard,
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr  # a worker without the flag needs none of it
