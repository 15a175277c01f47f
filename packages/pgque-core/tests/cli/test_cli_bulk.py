"""``pgque bulk``: a preview without --yes, the action with it, on a real PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable

import pytest

from pgque.core import Event, connect

Run = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def queue_url(postgres_url: str) -> str:
    sep = "&" if "?" in postgres_url else "?"
    return f"{postgres_url}{sep}queue=clibulk_{uuid.uuid4().hex[:12]}"


def test_bulk_retry_now_previews_then_acts(pgque: Run, queue_url: str) -> None:
    with connect(queue_url) as transport:
        transport.publish_many([(f"invoice-{i}", Event(kind="send")) for i in range(3)])
        transport.publish("other", Event(kind="send"))
        for _ in range(3):
            lease = transport.claim()
            assert lease is not None
            assert transport.nack(lease, delay=600, error="SMTP down")
        parked = {g.group_id for g in transport.groups(state="parked")}
        preview = pgque("bulk", "retry-now", "--state", "parked", "--url", queue_url)
        assert preview.returncode == 0, preview.stderr
        assert f"3 groups of queue {transport.queue} match: " in preview.stdout
        assert "nothing changed: run again with --yes" in preview.stderr
        assert {g.group_id for g in transport.groups(state="parked")} == parked
        done = pgque("bulk", "retry-now", "--state", "parked", "--yes", "--url", queue_url)
        assert done.returncode == 0, done.stderr
        assert "retried now 3 of 3 matching groups" in done.stdout
        assert transport.groups(state="parked") == []


def test_bulk_pause_is_bounded_and_says_where_to_go_on(pgque: Run, queue_url: str) -> None:
    with connect(queue_url) as transport:
        transport.publish_many([(f"t-{i}", Event(kind="k")) for i in range(3)])
        result = pgque(
            "bulk", "pause", "--prefix", "t-", "--limit", "2", "--yes", "--json", "--url", queue_url
        )
        assert result.returncode == 0, result.stderr
        out = json.loads(result.stdout)
        assert (out["matched"], out["changed"], out["ids"]) == (2, 2, ["t-0", "t-1"])
        assert out["next_after"] == "t-1"
        rest = pgque(
            "bulk", "pause", "--prefix", "t-", "--after", "t-1", "--yes", "--url", queue_url
        )
        assert rest.returncode == 0, rest.stderr
        assert "paused 1 of 1 matching group" in rest.stdout
        assert transport.stats().paused == 3


def test_bulk_dead_letters_and_refusals(pgque: Run, queue_url: str) -> None:
    with connect(queue_url) as transport:
        transport.publish_many([("a", Event(kind="x")), ("b", Event(kind="y"))])
        for _ in range(2):
            lease = transport.claim()
            assert lease is not None
            assert transport.dead_letter(lease, "bad")
        deleted = pgque("bulk", "delete", "--kind", "x", "--yes", "--url", queue_url)
        assert deleted.returncode == 0, deleted.stderr
        assert "deleted 1 of 1 matching dead letter" in deleted.stdout
        redriven = pgque("bulk", "redrive", "--prefix", "", "--yes", "--url", queue_url)
        assert "redrove 1 of 1 matching dead letter" in redriven.stdout
        assert transport.dead_letters() == []
    nothing = pgque("bulk", "pause", "--url", queue_url)
    assert nothing.returncode == 2
    assert "give --group GROUP or a filter" in nothing.stderr
    too_many = pgque("bulk", "delete", "--prefix", "", "--limit", "1001", "--url", queue_url)
    assert too_many.returncode == 2


def test_bulk_refuses_a_queue_never_used(pgque: Run, postgres_url: str) -> None:
    sep = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{sep}queue=clibulk_typo_{uuid.uuid4().hex[:8]}"
    result = pgque("bulk", "retry-now", "--state", "parked", "--url", url)
    assert result.returncode == 1, result.stdout
    assert "never" in result.stderr
