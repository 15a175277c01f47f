"""A RetryableConflict (deadlock or serialization failure, rolled back whole) is retried by the
one-shot commands a bounded number of times with backoff; past that they fail with one line.

The real console script runs against a ``conflict://`` backend (tests/cli/conflict_plugin):
registered through a generated ``.dist-info`` on ``PYTHONPATH``, it forwards to a real Redis
queue after failing the first ``PGQUE_CONFLICT_TIMES`` calls of each operation.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pgque.core import Event

Run = Callable[..., subprocess.CompletedProcess[str]]
Check = Callable[[subprocess.CompletedProcess[str]], str]

PLUGIN = Path(__file__).parent / "conflict_plugin"


@pytest.fixture
def plugin_path(tmp_path: Path) -> str:
    """Return a PYTHONPATH on which the console script finds the conflict:// backend."""
    site = tmp_path / "site"
    info = site / "pgque_conflict_plugin-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: pgque-conflict-plugin\nVersion: 0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[pgque.transports]\nconflict = pgque_conflict_plugin:ConflictBackend\n",
        encoding="utf-8",
    )
    return os.pathsep.join([str(PLUGIN), str(site)])


@pytest.fixture
def queue(redis_url: str) -> Iterator[str]:
    """Return a fresh Redis queue name; its keys are deleted afterwards."""
    import redis

    from pgque.redis import key_prefix

    name = f"cli_{uuid.uuid4().hex[:16]}"
    yield name
    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=key_prefix(name).replace("[", "\\[") + "*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def _env(plugin_path: str, redis_url: str, times: int) -> dict[str, str]:
    return {
        "PYTHONPATH": plugin_path,
        "PGQUE_CONFLICT_TARGET": redis_url,
        "PGQUE_CONFLICT_TIMES": str(times),
    }


def test_publish_is_retried_and_applied_once(
    pgque: Run, plugin_path: str, redis_url: str, queue: str
) -> None:
    from pgque.redis import RedisTransport

    env = _env(plugin_path, redis_url, 3)
    result = pgque("publish", "g", "k", '{"n": 1}', "--url", f"conflict://x?queue={queue}", env=env)
    assert result.returncode == 0, result.stderr
    with RedisTransport(redis_url, queue=queue) as transport:
        assert transport.stats().messages == 1
        lease = transport.claim()
        assert lease is not None
        assert int(result.stdout.strip()) == lease.message_id
        assert lease.event.data == {"n": 1}


def test_redrive_and_unblock_are_retried(
    pgque: Run, plugin_path: str, redis_url: str, queue: str
) -> None:
    from pgque.redis import RedisTransport

    with RedisTransport(redis_url, queue=queue, max_attempts=1, on_exhausted="block") as t:
        t.publish("dead", Event(kind="k"))
        lease = t.claim()
        assert lease is not None
        assert t.dead_letter(lease, "for the test")
        t.publish("stuck", Event(kind="k"))
        lease = t.claim()
        assert lease is not None
        assert t.nack(lease)
        assert t.claim() is None  # exhausted: "stuck" is now blocked
        assert t.stats().blocked == 1
    env = _env(plugin_path, redis_url, 2)
    url = f"conflict://x?queue={queue}"
    result = pgque("dead-letters", "redrive", "--all", "--url", url, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "redrove 1 dead letter in place"
    result = pgque("unblock", "stuck", "--url", url, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("unblocked stuck")
    result = pgque("stats", "--json", "--url", url, env=env)
    assert result.returncode == 0, result.stderr
    assert '"blocked": 0' in result.stdout
    assert '"messages": 2' in result.stdout
    result = pgque("dead-letters", "list", "--json", "--url", url, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["pause", "g"], 0, "paused g"),
        (["resume", "g"], 1, "is not paused"),
        # Each command's store is new: its queue has never been used, which they say.
        (["groups", "--json"], 1, "has never been used"),
        (["group", "g"], 1, "has never been used"),
        (["dead-letters", "show", "1"], 1, "has never been used"),
        (["dead-letters", "delete", "1"], 1, "has none of these dead letters"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None,
)
def test_the_group_and_dead_letter_commands_are_retried(
    pgque: Run, plugin_path: str, args: list[str], code: int, says: str
) -> None:
    """Each reaches the (fresh, in-memory) queue after two conflicts: what it says comes from
    the queue, not from the injected deadlock."""
    env = _env(plugin_path, "memory://", 2)
    result = pgque(*args, "--url", "conflict://x", env=env)
    assert result.returncode == code, result.stderr
    assert says in result.stdout + result.stderr
    assert "deadlock" not in result.stderr


def test_a_conflict_that_persists_fails_with_one_line(
    pgque: Run, plugin_path: str, redis_url: str, queue: str, error_line: Check
) -> None:
    from pgque.redis import RedisTransport

    env = _env(plugin_path, redis_url, 1000)
    result = pgque("publish", "g", "k", "--url", f"conflict://x?queue={queue}", env=env)
    line = error_line(result)
    assert "conflict" in line
    assert "5 times" in line
    with RedisTransport(redis_url, queue=queue) as transport:
        assert transport.stats().messages == 0


def test_retrying_pauses_on_the_shared_jittered_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands' retry pauses come from the worker's Backoff with jitter: each one from
    half to all of its doubling step."""
    from pgque.core import RetryableConflict
    from pgque.core.cli import _conflicts

    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    calls = iter([True, True, True, True, False])

    def call() -> str:
        if next(calls):
            raise RetryableConflict("deadlock detected (injected)")
        return "done"

    assert _conflicts.retrying(call, "test") == "done"
    first, longest = _conflicts.CONFLICT_BACKOFF
    steps = [min(first * 2**i, longest) for i in range(4)]
    assert len(slept) == 4
    assert all(step / 2 <= pause <= step for pause, step in zip(slept, steps, strict=True))
