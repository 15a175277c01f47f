"""The operator's actions and the scheduled messages over real PostgreSQL and Redis, the
dashboard served from the server's URL (``create_app(URL)``) as ``pgque dashboard`` does."""

from __future__ import annotations

import html
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from _dash_helpers import client, csrf_of

from pgque.core import Event, SupportsPurge, Transport, connect
from pgque.dashboard import create_app


@pytest.fixture(params=["postgres", "redis"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """The URL of the test server of each backend and a queue of this test, purged after."""
    url = str(request.getfixturevalue(f"{request.param}_url"))
    queue = f"dash-{uuid.uuid4().hex[:10]}"
    try:
        yield url, queue
    finally:
        with connect(url, queue=queue) as transport:
            assert isinstance(transport, SupportsPurge)
            transport.purge()


def _post(c: Any, queue: str, csrf: str, act: str, **fields: str) -> Any:
    answer = c.post(
        f"/queues/{queue}/actions/{act}", data={"csrf": csrf, **fields}, follow_redirects=False
    )
    assert answer.status_code == 303, answer.text
    return answer


def _done(page: str) -> str:
    found = re.search(r'<p class="done" role="status">(.*?)</p>', page, re.S)
    assert found is not None, "the page says nothing was done"
    return html.unescape(found.group(1))


def _blocked(t: Transport, group: str) -> None:
    while (lease := t.claim()) is not None:
        assert lease.group_id == group
        t.nack(lease, error="nope")
    info = t.group(group)
    assert info is not None
    assert info.state == "blocked"


def test_retry_now_ends_a_retry_delay(server: tuple[str, str]) -> None:
    url, queue = server
    with connect(url, queue=queue, max_attempts=5) as t:
        head = t.publish("tenant/1", Event(kind="charge"))
        lease = t.claim()
        assert lease is not None
        assert t.nack(lease, delay=3600, error="card declined")
        with client(create_app(url, allow_actions=True)) as c:
            page = c.get(f"/queues/{queue}/groups/tenant%2F1").text
            assert 'data-action="retry-now"' in page
            done = _post(c, queue, csrf_of(page), "retry-now", group="tenant/1")
            assert done.headers["location"].endswith("done=retry-now")
            assert _done(c.get(done.headers["location"]).text).startswith("ended the retry delay")
            again = _post(c, queue, csrf_of(page), "retry-now", group="tenant/1")
            assert again.headers["location"].endswith("done=no-retry")
        lease = t.claim()
        assert lease is not None
        assert (lease.message_id, lease.attempt) == (head, 2)
        assert lease.event.kind == "charge"


def test_unblock_acts_on_the_head_seen_only(server: tuple[str, str]) -> None:
    url, queue = server
    with connect(url, queue=queue, max_attempts=1, on_exhausted="block") as t:
        first = t.publish("g", Event(kind="first"))
        second = t.publish("g", Event(kind="second"))
        _blocked(t, "g")
        with client(create_app(url, allow_actions=True)) as c:
            page = c.get(f"/queues/{queue}/groups/g").text
            assert f'name="head" value="{first}"' in page
            csrf = csrf_of(page)
            assert t.unblock("g", drop_head=True)  # another operator, meanwhile
            _blocked(t, "g")
            refused = _post(c, queue, csrf, "unblock", group="g", head=str(first))
            assert refused.headers["location"].endswith(f"done=head-changed&message={first}")
            assert _done(c.get(refused.headers["location"]).text).startswith(
                f"refused: the group's head is no longer message #{first}"
            )
            info = t.group("g")
            assert info is not None
            assert (info.state, info.head_message_id) == ("blocked", second)
            done = _post(c, queue, csrf, "unblock", group="g", head=str(second))
            assert done.headers["location"].endswith(f"done=unblock&message={second}")
        lease = t.claim()
        assert lease is not None
        assert (lease.message_id, lease.attempt) == (second, 1)


def test_scheduled_messages_are_listed_and_cancelled(server: tuple[str, str]) -> None:
    url, queue = server
    with connect(url, queue=queue) as t:
        ids = [t.publish(f"g{i}", Event(kind=f"k{i}"), delay=3600 + i) for i in range(3)]
        with client(create_app(url, allow_actions=True)) as c:
            overview = c.get("/api/queues").json()["queues"]
            (mine,) = [q for q in overview if q["queue"] == queue]
            assert mine["scheduled"] == 3
            page = c.get(f"/queues/{queue}/scheduled", params={"limit": 2}).text
            assert re.findall(r'<tr data-message="(\d+)"', page) == [str(i) for i in ids[:2]]
            assert re.search(r"\(in (59\.9|60\.0) min\)", page)
            rest = c.get(f"/api/queues/{queue}/scheduled", params={"after": ids[1]}).json()
            assert [(m["id"], m["group_id"], m["kind"]) for m in rest["scheduled"]] == [
                (ids[2], "g2", "k2")
            ]
            done = _post(c, queue, csrf_of(page), "cancel", id=str(ids[1]), confirm=str(ids[1]))
            assert done.headers["location"].endswith(f"done=cancel&message={ids[1]}")
        assert [m.id for m in t.scheduled()] == [ids[0], ids[2]]


def test_browse_pages_list_a_groups_messages_and_find_one(server: tuple[str, str]) -> None:
    url, queue = server
    with connect(url, queue=queue) as t:
        ids = [t.publish("order-42", Event(kind="step", data={"text": "y" * 300})) for _ in "abc"]
        mail = t.publish("order-43", Event(kind="mail"))
        later = t.publish("order-42", Event(kind="remind"), delay=3600)
        with client(create_app(url)) as c:
            page = c.get(f"/queues/{queue}/groups/order-42").text
            assert [int(n) for n in re.findall(r'data-message="(\d+)"', page)] == ids
            assert f'data-message="{ids[0]}" class="head"' in page
            assert f'data-scheduled="{later}"' in page
            found = c.get(f"/api/queues/{queue}/messages/{ids[1]}").json()["message"]
            assert (found["group_id"], found["is_head"], found["truncated"]) == (
                "order-42",
                False,
                True,
            )
            by_kind = c.get(f"/api/queues/{queue}/messages", params={"kind": "mail"}).json()
            assert by_kind["supported"] is True
            assert [m["message_id"] for m in by_kind["messages"]] == [mail]
            lease = t.claim()
            assert lease is not None
            assert t.ack(lease)
            assert c.get(f"/api/queues/{queue}/messages/{lease.message_id}").status_code == 404
