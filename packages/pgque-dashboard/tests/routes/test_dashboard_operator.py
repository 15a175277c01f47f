"""The operator's actions on a group (retry now, unblock the head seen), the scheduled messages
and the periodic schedules, over in-memory queues (Starlette TestClient)."""

from __future__ import annotations

import html
import re
from typing import Any

from _dash_helpers import Scene, client, csrf_of

from pgque.core import Event
from pgque.dashboard import create_app


def _park(scene: Scene, group: str, delay: float = 600.0) -> int:
    """Publish to *group*, fail its head with a retry *delay*; return the head's id."""
    with scene.sync("orders", max_attempts=5) as t:
        head = t.publish(group, Event(kind="charge"))
        lease = t.claim()
        assert lease is not None
        assert t.nack(lease, delay=delay, error="card declined")
        info = t.group(group)
        assert info is not None
        assert info.state == "parked"
    return head


def _block(scene: Scene, group: str, *kinds: str) -> list[int]:
    """Publish *kinds* to *group*, fail its head until the group is blocked; return the ids."""
    with scene.sync("orders", max_attempts=1, on_exhausted="block") as t:
        ids = [t.publish(group, Event(kind=kind)) for kind in kinds]
        while (lease := t.claim()) is not None:
            t.nack(lease, error="nope")
        info = t.group(group)
        assert info is not None
        assert info.state == "blocked"
    return ids


def _post(c: Any, csrf: str, act: str, **fields: str) -> Any:
    return c.post(
        f"/queues/orders/actions/{act}", data={"csrf": csrf, **fields}, follow_redirects=False
    )


def _done(page: str) -> str:
    found = re.search(r'<p class="done" role="status">(.*?)</p>', page, re.S)
    assert found is not None, "the page says nothing was done"
    return html.unescape(found.group(1))


# -- retry now ------------------------------------------------------------------------------------


def test_a_parked_group_has_a_retry_now_button_that_ends_its_delay(scene: Scene) -> None:
    head = _park(scene, "tenant/7")
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with client(app) as c:
        page = c.get("/queues/orders/groups/tenant%2F7").text
        (form,) = re.findall(r'<form [^>]*actions/retry-now"[^>]*>', page)
        assert "hx-confirm=" in form
        assert "data-confirm-value" not in form  # nothing is destroyed
        assert 'data-action="retry-now"' in page
        done = _post(c, csrf_of(page), "retry-now", group="tenant/7")
        assert done.status_code == 303, done.text
        assert done.headers["location"] == "/queues/orders/groups/tenant%2F7?done=retry-now"
        after = c.get(done.headers["location"]).text
        assert _done(after) == (
            "ended the retry delay: the head is claimable now (its attempts and last error kept)"
        )
        assert "<td>ready</td>" in after
        assert 'actions/retry-now"' not in after  # a ready group waits for no retry
        # Asked again: the group waits for no retry any more, and the page says so.
        again = _post(c, csrf_of(after), "retry-now", group="tenant/7")
        assert again.headers["location"].endswith("done=no-retry")
        assert _done(c.get(again.headers["location"]).text) == (
            "nothing to do: the group was not waiting for a retry"
        )
    with scene.sync("orders") as t:
        info = t.group("tenant/7")
        assert info is not None
        assert (info.state, info.head_attempts) == ("ready", 1)
        assert info.last_error is not None
        lease = t.claim()
        assert lease is not None
        assert (lease.message_id, lease.attempt) == (head, 2)


def test_retry_now_is_an_action_like_the_others(scene: Scene) -> None:
    _park(scene, "a")
    with client(create_app(transports=[scene.async_("orders")])) as c:
        page = c.get("/queues/orders/groups/a").text
        assert "retry-now" not in page  # read-only: no button
        refused = c.post("/queues/orders/actions/retry-now", data={"group": "a", "csrf": "x"})
        assert refused.status_code == 403
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with client(app) as c:
        csrf = csrf_of(c.get("/queues/orders/groups/a").text)
        assert _post(c, "0" * 64, "retry-now", group="a").status_code == 403
        evil = c.post(
            "/queues/orders/actions/retry-now",
            data={"group": "a", "csrf": csrf},
            headers={"origin": "http://evil.example"},
        )
        assert evil.status_code == 403
        assert _post(c, csrf, "retry-now").status_code == 400  # no group
    with scene.sync("orders") as t:
        info = t.group("a")
        assert info is not None
        assert info.state == "parked"


# -- unblock the head the operator saw ------------------------------------------------------------


def test_unblock_carries_the_head_shown_and_the_page_names_the_message(scene: Scene) -> None:
    first, _second = _block(scene, "b/1", "first", "second")
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with client(app) as c:
        page = c.get("/queues/orders/groups/b%2F1").text
        for act in ("unblock", "drop-head"):
            (form,) = re.findall(rf'<form [^>]*actions/{act}".*?</form>', page, re.S)
            assert f'name="head" value="{first}"' in form, act
        done = _post(c, csrf_of(page), "unblock", group="b/1", head=str(first))
        assert done.headers["location"] == (
            f"/queues/orders/groups/b%2F1?done=unblock&message={first}"
        )
        assert _done(c.get(done.headers["location"]).text) == (
            f"unblocked the group: its head, message #{first}, is retried"
        )


def test_unblock_is_refused_when_the_head_changed_since_the_page_was_read(scene: Scene) -> None:
    first, second = _block(scene, "g", "first", "second")
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with client(app) as c:
        page = c.get("/queues/orders/groups/g").text
        csrf = csrf_of(page)
        # Meanwhile another operator dropped that head, and the next one blocked the group.
        with scene.sync("orders", max_attempts=1, on_exhausted="block") as t:
            assert t.unblock("g", drop_head=True)
            while (lease := t.claim()) is not None:
                t.nack(lease, error="nope")
            info = t.group("g")
            assert info is not None
            assert (info.state, info.head_message_id) == ("blocked", second)
        for act, fields in (("unblock", {}), ("drop-head", {"confirm": "g"})):
            refused = _post(c, csrf, act, group="g", head=str(first), **fields)
            assert refused.status_code == 303, refused.text
            assert refused.headers["location"].endswith(f"done=head-changed&message={first}")
            said = _done(c.get(refused.headers["location"]).text)
            assert said == (
                f"refused: the group's head is no longer message #{first} (someone acted "
                "meanwhile); nothing was changed: read the page again"
            ), act
        with scene.sync("orders") as t:
            info = t.group("g")
            assert info is not None
            assert (info.state, info.head_message_id) == ("blocked", second)
            # Only the other operator's drop: the refused drop-head moved nothing.
            assert [d.message_id for d in t.dead_letters()] == [first]
        # The head the page now shows is acted on, and named.
        done = _post(c, csrf, "drop-head", group="g", head=str(second), confirm="g")
        assert done.headers["location"].endswith(f"done=drop-head&message={second}")
        assert _done(c.get(done.headers["location"]).text) == (
            f"unblocked the group: its head, message #{second}, went to the dead letters"
        )
        bad = _post(c, csrf, "unblock", group="g", head="x")
        assert bad.status_code == 400
    with scene.sync("orders") as t:
        assert [d.message_id for d in t.dead_letters()] == [first, second]


def test_a_made_up_message_in_the_address_is_no_text_on_the_page(scene: Scene) -> None:
    _block(scene, "g", "k")
    with client(create_app(transports=[scene.async_("orders")])) as c:
        page = c.get("/queues/orders/groups/g?done=unblock&message=<b>hi</b>").text
        assert "<b>hi" not in page
        assert "&lt;b&gt;hi" not in page
        assert _done(page) == "unblocked the group: its head is retried"


# -- scheduled messages ---------------------------------------------------------------------------

#: When the scenes' scheduled messages were published: 2033-05-18T03:33:20Z, after any test run.
_FUTURE = 2_000_000_000.0


def _schedule(scene: Scene, *items: tuple[str, str, float]) -> list[int]:
    """Publish (group, kind, delay) items as scheduled messages at :data:`_FUTURE`; their ids."""
    from pgque.core import InMemoryTransport

    t = InMemoryTransport(store=scene.store, queue="orders", clock=lambda: _FUTURE)
    return [t.publish(group, Event(kind=kind), delay=delay) for group, kind, delay in items]


def test_the_scheduled_page_lists_messages_not_due_yet_by_keyset(scene: Scene) -> None:
    ids = _schedule(
        scene, ("tenant/1", "remind", 60.0), ("tenant/2", "expire", 3600.0), ("b", "k", 1.0)
    )
    with scene.sync("orders") as t:
        t.publish("now", Event(kind="k"))  # not scheduled: not listed
    with client(create_app(transports=[scene.async_("orders")])) as c:
        page = c.get("/queues/orders/scheduled").text
        rows = re.findall(r'<tr data-message="(\d+)">(.*?)</tr>', page, re.S)
        assert [int(i) for i, _ in rows] == ids
        first = rows[0][1]
        assert 'href="/queues/orders/groups/tenant%2F1"' in first
        assert "remind" in first
        assert "2033-05-18T03:34:20Z" in first  # due: ISO 8601, UTC
        assert re.search(r"in \d+\.\d (s|min|h)", first)  # and how far off
        assert 'method="post"' not in page  # read-only: no cancel
        assert 'href="/queues/orders/scheduled"' in page  # the nav links it
        paged = c.get("/queues/orders/scheduled", params={"limit": 2}).text
        assert len(re.findall(r'<tr data-message="', paged)) == 2
        assert f'href="/queues/orders/scheduled?after={ids[1]}&amp;limit=2"' in paged
        rest = c.get("/queues/orders/scheduled", params={"limit": 2, "after": ids[1]}).text
        assert re.findall(r'<tr data-message="(\d+)"', rest) == [str(ids[2])]
        assert 'class="next"' not in rest
        api = c.get("/api/queues/orders/scheduled", params={"limit": 2}).json()
        assert [m["id"] for m in api["scheduled"]] == ids[:2]
        assert api["scheduled"][0]["group_id"] == "tenant/1"
        assert api["scheduled"][0]["due_at"] == _FUTURE + 60
        assert api["next_after"] == ids[1]
        assert c.get("/queues/orders/scheduled", params={"limit": 1001}).status_code == 400
        assert c.get("/api/queues/nope/scheduled").status_code == 404


def test_the_overview_shows_how_many_are_scheduled_and_the_next_due(scene: Scene) -> None:
    _schedule(scene, ("a", "k", 60.0), ("b", "k", 30.0))
    with client(create_app(transports=[scene.async_("orders")])) as c:
        for path in ("/", "/fragments/queues"):
            row = c.get(path).text.split('data-queue="orders"')[1].split("</tr>")[0]
            assert re.search(
                r'data-count="scheduled"><a href="/queues/orders/scheduled">2</a>', row
            ), row
            assert "2033-05-18T03:33:50Z" in row  # the next due, ISO 8601 UTC
        summary = c.get("/queues/orders/summary").text
        assert "2033-05-18T03:33:50Z" in summary


def test_cancel_needs_the_confirmation_of_the_message_it_drops(scene: Scene) -> None:
    keep, drop = _schedule(scene, ("a", "k", 60.0), ("b", "k", 60.0))
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with client(app) as c:
        page = c.get("/queues/orders/scheduled").text
        (form,) = re.findall(rf'<tr data-message="{drop}">.*?(<form [^>]*>)', page, re.S)
        assert "actions/cancel" in form
        assert f'data-confirm-value="{drop}"' in form
        assert "hx-confirm=" in form
        csrf = csrf_of(page)
        for confirm in (None, "", str(keep), f"#{drop}", "yes"):
            fields = {"id": str(drop)} if confirm is None else {"id": str(drop), "confirm": confirm}
            refused = c.post("/queues/orders/actions/cancel", data={"csrf": csrf, **fields})
            assert refused.status_code == 400, confirm
            assert "message id" in refused.text
        with scene.sync("orders") as t:
            assert [m.id for m in t.scheduled()] == [keep, drop]
        done = _post(c, csrf, "cancel", id=str(drop), confirm=str(drop))
        assert done.headers["location"] == (f"/queues/orders/scheduled?done=cancel&message={drop}")
        after = c.get(done.headers["location"]).text
        assert _done(after) == f"cancelled scheduled message #{drop}: it will not be delivered"
        assert re.findall(r'<tr data-message="(\d+)"', after) == [str(keep)]
        again = _post(c, csrf, "cancel", id=str(drop), confirm=str(drop))
        assert again.headers["location"].endswith(f"done=not-scheduled&message={drop}")
        assert _done(c.get(again.headers["location"]).text) == (
            f"nothing to do: message #{drop} was not scheduled any more (due, or cancelled)"
        )
    with client(create_app(transports=[scene.async_("orders")])) as c:
        refused = c.post("/queues/orders/actions/cancel", data={"id": str(keep), "csrf": "x"})
        assert refused.status_code == 403
    with scene.sync("orders") as t:
        assert [m.id for m in t.scheduled()] == [keep]


def test_hostile_group_ids_and_kinds_are_text_on_the_scheduled_page(scene: Scene) -> None:
    from _dash_helpers import HOSTILE_IDS

    _schedule(scene, *((text, f"kind {text}"[:200], 60.0) for text in HOSTILE_IDS))
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with client(app) as c:
        page = c.get("/queues/orders/scheduled", params={"limit": 1000}).text
    assert len(re.findall(r'<tr data-message="', page)) == len(HOSTILE_IDS)
    assert re.findall(r"<script[^>]*>", page) == [
        '<script src="/static/htmx.min.js">',
        '<script src="/static/dashboard.js">',
    ]
    assert "<img" not in page
    assert "<svg onload" not in page


# -- periodic schedules ---------------------------------------------------------------------------


def _beat() -> Any:
    from pgque.core.scheduling import Schedule, ScheduleEntry

    return Schedule(
        [
            ScheduleEntry(name="new-year", cron="0 0 1 1 *", group_id="cal/<b>", kind="greet"),
            ScheduleEntry(
                name="nightly",
                cron="30 2 * * *",
                tz="Europe/Paris",
                group_id="reports",
                kind="report.build",
                missed="catch_up",
                max_catch_up=3,
            ),
        ]
    )


def test_the_schedules_page_shows_each_entrys_last_and_next_tick(scene: Scene) -> None:
    import time
    from datetime import datetime, timezone

    beat = _beat()
    with scene.sync("orders") as t:
        last = 1_700_000_000.0  # 2023-11-14T22:13:20Z
        assert t.publish_tick("nightly", last, "reports", Event(kind="report.build")) is not None
    app = create_app(transports=[scene.async_("orders")], schedules={"myapp.beat:schedule": beat})
    with client(app) as c:
        page = c.get("/queues/orders/schedules").text
        assert 'href="/queues/orders/schedules"' in page  # the nav links it
        assert "myapp.beat:schedule" in page
        rows = dict(re.findall(r'<tr data-entry="([^"]+)">(.*?)</tr>', page, re.S))
        assert set(rows) == {"new-year", "nightly"}
        nightly = rows["nightly"]
        for text in ("30 2 * * *", "Europe/Paris", "reports", "report.build", "catch_up &lt;=3"):
            assert text in nightly, text
        assert "2023-11-14T22:13:20Z" in nightly  # its last tick, ISO 8601 UTC
        new_year = rows["new-year"]
        assert "never" in new_year
        assert "cal/&lt;b&gt;" in new_year
        now = datetime.fromtimestamp(time.time(), timezone.utc)
        assert f"{now.year + 1}-01-01T00:00:00Z" in new_year  # its next tick
        # The next tick of an entry of another time zone: 02:30 in Paris is 00:30 or 01:30 UTC.
        assert re.search(r"\d{4}-\d\d-\d\dT0[01]:30:00Z", nightly), nightly
        assert "02:30" in nightly  # and its wall time in that zone


def test_without_a_schedule_the_page_says_how_to_give_one(scene: Scene) -> None:
    with client(create_app(transports=[scene.async_("orders")])) as c:
        page = c.get("/queues/orders/schedules")
        assert page.status_code == 200
        assert "--schedule MODULE:SCHEDULE" in page.text
        assert "create_app(schedules=" in page.text
