"""``pgque metrics``: the real console script serves the queues' metrics over HTTP."""

from __future__ import annotations

import contextlib
import http.client
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from pgque.conformance.servers.restartable import free_port
from pgque.core import Event, connect

Run = Callable[..., subprocess.CompletedProcess[str]]
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _serve(folder: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    script = str(Path(sys.executable).parent / "pgque")
    return subprocess.Popen(
        [script, "metrics", *args],
        cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@contextlib.contextmanager
def serving(folder: Path, env: dict[str, str], *args: str) -> Iterator[subprocess.Popen[str]]:
    """Run ``pgque metrics ARGS``; on the way out stop it with SIGTERM and check it exits 0."""
    proc = _serve(folder, env, *args)
    try:
        yield proc
    finally:
        try:
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, err


def scrape_when_up(proc: subprocess.Popen[str], port: int, timeout: float = 30) -> Samples:
    """Scrape http://127.0.0.1:PORT/metrics once it answers (within *timeout* seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, proc.communicate()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
                text = reply.read().decode()
            break
        except (OSError, http.client.HTTPException):  # not up yet (see test_cli_processes)
            assert time.monotonic() < deadline, "pgque metrics never answered"
            time.sleep(0.05)
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_metrics_serves_the_queues_on_a_loopback_port(
    postgres_url: str, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    queue = f"cli-metrics-{uuid.uuid4().hex[:8]}"
    with connect(postgres_url, queue=queue) as transport:
        transport.publish_many([(f"g{n}", Event(kind="job")) for n in range(3)])
        lease = transport.claim()
        assert lease is not None
        port = free_port()
        args = ["--url", postgres_url, "--queue", queue, "--port", str(port), "--top-k", "2"]
        with serving(tmp_path, clean_env, *args) as proc:
            samples = scrape_when_up(proc, port)
        transport.purge()  # type: ignore[attr-defined]
    assert samples[("pgque_up", (("queue", queue),))] == 1
    assert samples[("pgque_messages", (("queue", queue),))] == 3
    assert samples[("pgque_in_flight_groups", (("queue", queue),))] == 1
    listed = sorted(
        dict(labels)["group"]
        for (name, labels), _ in samples.items()
        if name == "pgque_group_head_age_seconds"
    )
    assert listed == ["g0", "g1"]


def test_metrics_answers_with_up_0_when_the_backend_is_down(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    dead = f"postgresql://postgres@127.0.0.1:{free_port()}/x"
    port = free_port()
    started = time.monotonic()
    with serving(tmp_path, clean_env, "--url", dead, "-q", "orders", "--port", str(port)) as proc:
        samples = scrape_when_up(proc, port)
    assert samples[("pgque_up", (("queue", "orders"),))] == 0
    assert samples[("pgque_scrape_errors_total", (("queue", "orders"),))] == 1
    assert time.monotonic() - started < 30  # a refused connection fails at once


def test_metrics_refuses_a_top_k_past_the_bound(pgque: Run) -> None:
    result = pgque("metrics", "--url", "memory://", "--top-k", "101")
    assert result.returncode == 2
    assert "--top-k" in result.stderr


def test_metrics_port_taken_is_one_line(pgque: Run, error_line: Callable[..., str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = pgque("metrics", "--url", "memory://", "--port", str(port), timeout=30)
    line = error_line(result)
    assert line == f"pgque: error: cannot serve metrics on 127.0.0.1:{port}: Address already in use"


def test_metrics_refuses_a_top_keys_past_the_bound(pgque: Run) -> None:
    result = pgque("metrics", "--url", "memory://", "--top-keys", "101")
    assert result.returncode == 2
    assert "--top-keys" in result.stderr
