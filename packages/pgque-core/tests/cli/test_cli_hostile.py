"""Bad and hostile input through the ``pgque`` command line.

Every refusal is one ``pgque: error:`` line (usage errors exit 2, refused values 1), never a
traceback; a bad queue name is refused before any connection is tried (the URLs below point at
a closed port and carry a password that must not be echoed); text full of SQL metacharacters is
stored and read back as plain data. The catalogue of refused values runs the command line's
entry function in this process (the console script is a one-line wrapper of it, and a process
start costs seconds on a busy machine); everything else runs the real console script.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable

import pytest

from pgque.core import Event, connect
from pgque.core.cli._app import run

Run = Callable[..., subprocess.CompletedProcess[str]]

SECRET = "S3cr3t-pw"
CLOSED_PG = f"postgresql://app:{SECRET}@127.0.0.1:9/app?timeout=1"
CLOSED_REDIS = f"redis://:{SECRET}@127.0.0.1:9/0?retries=0"
MIB = 1024 * 1024


def _one_error_line(result: subprocess.CompletedProcess[str], code: int, fragment: str) -> None:
    assert result.returncode == code, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("pgque: error: "), lines[0]
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.stderr
    assert SECRET not in result.stderr + result.stdout


BAD = [
    pytest.param(["publish", "g", "k", '{"x": NaN}'], 1, "not a JSON number", id="NaN data"),
    pytest.param(["publish", "g", "k", "1e999"], 1, "not a JSON number", id="infinite data"),
    pytest.param(["publish", "g", "k", "{bad"], 1, "not valid JSON", id="invalid JSON"),
    pytest.param(["publish", "x" * 513, "k"], 1, "513 bytes", id="long group"),
    pytest.param(["publish", "g", "k", "--priority", "99"], 2, "--priority", id="priority 99"),
    pytest.param(["publish", "g", "k", "--priority", "nan"], 2, "--priority", id="priority nan"),
    pytest.param(["publish", "g", "k", "-H", "novalue"], 2, "KEY=VALUE", id="bad header"),
    pytest.param(["dead-letters", "list", "--limit", "0"], 2, "--limit", id="limit 0"),
    pytest.param(["dead-letters", "list", "--limit", "9" * 30], 2, "--limit", id="limit huge"),
    pytest.param(["dead-letters", "redrive", "1;DROP"], 2, "IDS", id="redrive ids"),
    pytest.param(
        ["stats", "--queue", "x'; DROP TABLE t; --"], 1, "invalid queue name", id="queue flag"
    ),
]


@pytest.mark.parametrize(("args", "code", "fragment"), BAD)
def test_bad_input_gets_one_typed_error_line(
    capsys: pytest.CaptureFixture[str], args: list[str], code: int, fragment: str
) -> None:
    returncode = run([*args, "--url", "memory://"])
    out, err = capsys.readouterr()
    _one_error_line(subprocess.CompletedProcess(args, returncode, out, err), code, fragment)


@pytest.mark.parametrize("url", [CLOSED_PG, CLOSED_REDIS, "memory://"])
def test_a_bad_queue_name_in_the_url_is_refused_before_connecting(pgque: Run, url: str) -> None:
    sep = "&" if "?" in url else "?"
    result = pgque("stats", "--url", f"{url}{sep}queue=Bad%3BDROP")
    _one_error_line(result, 1, "invalid queue name 'Bad;DROP'")


def test_an_event_beyond_max_event_bytes_is_refused(
    pgque: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    big = json.dumps("x" * (8 * MIB + 1))
    _one_error_line(
        pgque("publish", "g", "k", "-", "--url", "memory://", stdin=big), 1, "max_event_bytes"
    )
    for args in (
        ["publish", "g", "k", json.dumps("x" * 2048), "--url", "memory://?max_event_bytes=1024"],
        ["publish", "g", "k", "--url", "memory://?max_event_bytes=lots"],
    ):
        returncode = run(args)
        out, err = capsys.readouterr()
        _one_error_line(subprocess.CompletedProcess(args, returncode, out, err), 1, "max_event")


HOSTILE_GROUP = "'; DROP TABLE pgque_fifo.messages; -- $$ \\ ]] {pgque:x}"
HOSTILE_DATA = {"sql": "'); DELETE FROM pgque_fifo.groups; --", "lua": "]] redis.call('FLUSHALL')"}


@pytest.mark.parametrize("backend", ["postgres_url", "redis_url"])
def test_metacharacters_round_trip_through_the_cli(
    pgque: Run, request: pytest.FixtureRequest, backend: str
) -> None:
    server: str = request.getfixturevalue(backend)
    sep = "&" if "?" in server else "?"
    url = f"{server}{sep}queue=cli_{uuid.uuid4().hex[:12]}"
    result = pgque(
        "publish", HOSTILE_GROUP, "k'; --", json.dumps(HOSTILE_DATA), "-H", "h=$$", "--url", url
    )
    assert result.returncode == 0, result.stderr
    with connect(url) as transport:
        lease = transport.claim()
        assert lease is not None
        assert lease.group_id == HOSTILE_GROUP
        assert (lease.event.kind, lease.event.data, lease.event.headers) == (
            "k'; --",
            HOSTILE_DATA,
            {"h": "$$"},
        )
        assert transport.nack(lease)
        if backend == "postgres_url":
            # The operator command takes the same text as a plain group id (one more process
            # start only where the catalogue at transport level has no CLI counterpart).
            unblocked = pgque("unblock", HOSTILE_GROUP, "--url", url)
            _one_error_line(unblocked, 1, "is not blocked")
        transport.publish(HOSTILE_GROUP, Event(kind="second"))
        stats = transport.stats()
        assert (stats.groups, stats.messages) == (1, 2)
        if hasattr(transport, "purge"):
            transport.purge()
