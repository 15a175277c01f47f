"""``pgque groups retry-now``, ``pgque unblock --head`` and ``pgque dead-letters redrive
--retry-now`` through the real console script, on a real PostgreSQL."""

from __future__ import annotations

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
    return f"{postgres_url}{sep}queue=clir_{uuid.uuid4().hex[:12]}"


def test_groups_retry_now_ends_a_retry_delay(pgque: Run, queue_url: str) -> None:
    with connect(queue_url) as transport:
        first = transport.publish("invoice-9", Event(kind="send"))
        lease = transport.claim()
        assert lease is not None
        assert transport.nack(lease, delay=600, error="SMTP down")
        result = pgque("groups", "retry-now", "invoice-9", "--url", queue_url)
        assert result.returncode == 0, result.stderr
        assert f"invoice-9: its head (message {first}) is claimable now" in result.stdout
        again = transport.claim()
        assert again is not None
        assert (again.message_id, again.attempt) == (first, 2)
        refused = pgque("groups", "retry-now", "invoice-9", "--url", queue_url)
        assert refused.returncode == 1
        assert "is not waiting for a retry (it is leased)" in refused.stderr
        listing = pgque("groups", "--url", queue_url, "--json")
        assert listing.returncode == 0, listing.stderr
        assert '"group_id": "invoice-9"' in listing.stdout  # the group's listing still works


def test_unblock_names_the_message_and_refuses_a_head_that_changed(
    pgque: Run, postgres_url: str
) -> None:
    sep = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{sep}queue=clib_{uuid.uuid4().hex[:12]}&max_attempts=1&on_exhausted=block"
    with connect(url) as transport:
        head = transport.publish("order-42", Event(kind="created"))
        later = transport.publish("order-42", Event(kind="shipped"))
        lease = transport.claim()
        assert lease is not None
        assert transport.nack(lease)
        assert transport.claim() is None  # blocked
        refused = pgque("unblock", "order-42", "--head", str(later), "--url", url)
        assert refused.returncode == 1
        assert f"the head of 'order-42' is message {head}, not {later}" in refused.stderr
        info = transport.group("order-42")
        assert info is not None
        assert info.state == "blocked"
        done = pgque("unblock", "order-42", "--head", str(head), "--drop-head", "--url", url)
        assert done.returncode == 0, done.stderr
        assert f"unblocked order-42: message {head} moved to the dead letters" in done.stdout
        [letter] = transport.dead_letters()
        assert letter.message_id == head
        again = pgque("unblock", "order-42", "--url", url)
        assert again.returncode == 1
        assert "is not blocked" in again.stderr


def test_redrive_retry_now_makes_a_parked_group_claimable(pgque: Run, queue_url: str) -> None:
    with connect(queue_url) as transport:
        first = transport.publish("g", Event(kind="a"))
        transport.publish("g", Event(kind="b"))
        lease = transport.claim()
        assert lease is not None
        assert transport.dead_letter(lease, "bad", error="no such sku")
        second = transport.claim()
        assert second is not None
        assert transport.nack(second, delay=600)
        result = pgque("dead-letters", "redrive", "--all", "--retry-now", "--url", queue_url)
        assert result.returncode == 0, result.stderr
        back = transport.claim()
        assert back is not None
        assert back.message_id == first  # at once, ahead of the nacked one
        info = transport.group("g")
        assert info is not None
        assert info.last_error is not None
        assert info.last_error.message == "no such sku"  # the group keeps its history
