"""Bulk actions on the dashboard, over in-memory queues (Starlette TestClient): a POST without
the confirmation previews and changes nothing; the confirmed POST re-reads the selection, acts
within its bound and says how many it changed."""

from __future__ import annotations

import html
import re
from typing import Any

from _dash_helpers import Scene, client, csrf_of

from pgque.core import Event
from pgque.dashboard import create_app


def _park(scene: Scene, *groups: str) -> None:
    with scene.sync("orders") as t:
        t.publish_many([(g, Event(kind="charge")) for g in groups])
        for _ in groups:
            lease = t.claim()
            assert lease is not None
            assert t.nack(lease, delay=600, error="card declined")


def _bulk(c: Any, csrf: str, act: str, **fields: Any) -> Any:
    return c.post(
        f"/queues/orders/bulk/{act}", data={"csrf": csrf, **fields}, follow_redirects=False
    )


def _done(page: str) -> str:
    found = re.search(r'<p class="done" role="status">(.*?)</p>', page, re.S)
    assert found is not None, "the page says nothing was done"
    return html.unescape(found.group(1))


def test_a_bulk_retry_now_is_previewed_then_confirmed_and_re_read(scene: Scene) -> None:
    _park(scene, "a", "b", "c")
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with client(app) as c:
        page = c.get("/queues/orders/groups?state=parked").text
        assert 'data-action="bulk-retry-now"' in page
        csrf = csrf_of(page)
        preview = _bulk(c, csrf, "retry-now", state="parked", prefix="")
        assert preview.status_code == 200, preview.text
        assert "<strong>3</strong> groups match" in preview.text
        assert 'name="confirm" value="bulk-retry-now"' in preview.text
        with scene.sync("orders") as t:
            assert len(t.groups(state="parked")) == 3  # the preview changed nothing
            assert t.retry_now("b")  # someone acts meanwhile: "b" leaves the filter
        done = _bulk(c, csrf, "retry-now", state="parked", prefix="", confirm="bulk-retry-now")
        assert done.status_code == 303, done.text
        location = done.headers["location"]
        assert location == "/queues/orders/groups?done=bulk-retry-now&matched=2&changed=2"
        assert _done(c.get(location).text) == (
            "bulk retry now: 2 of 2 matching groups are claimable now"
        )
    with scene.sync("orders") as t:
        assert t.groups(state="parked") == []


def test_a_bulk_action_on_ticked_groups_is_bounded(scene: Scene) -> None:
    with scene.sync("orders") as t:
        t.publish_many([(f"g{i}", Event(kind="k")) for i in range(4)])
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with client(app) as c:
        csrf = csrf_of(c.get("/queues/orders/groups").text)
        ticked = {"group": ["g0", "g2", "g3"], "prefix": "", "limit": "2"}
        assert _bulk(c, csrf, "pause", **ticked).status_code == 400  # 3 ids over a bound of 2
        ticked["limit"] = "3"
        done = _bulk(c, csrf, "pause", **ticked, confirm="bulk-pause")
        assert done.headers["location"].endswith("done=bulk-pause&matched=3&changed=3")
    with scene.sync("orders") as t:
        assert [g.group_id for g in t.groups(state="paused")] == ["g0", "g2", "g3"]


def test_bulk_is_refused_read_only_without_csrf_or_selection(scene: Scene) -> None:
    _park(scene, "a")
    with client(create_app(transports=[scene.async_("orders")])) as c:
        page = c.get("/queues/orders/groups").text
        assert "bulk-retry-now" not in page  # read-only: no bulk form
        refused = c.post("/queues/orders/bulk/retry-now", data={"csrf": "x", "prefix": ""})
        assert refused.status_code == 403
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with client(app) as c:
        csrf = csrf_of(c.get("/queues/orders/groups").text)
        wrong = _bulk(c, "0" * 64, "retry-now", prefix="", confirm="bulk-retry-now")
        assert wrong.status_code == 403
        assert _bulk(c, csrf, "retry-now").status_code == 400  # no selection, no filter
        assert _bulk(c, csrf, "explode", prefix="").status_code == 404
        assert _bulk(c, csrf, "retry-now", prefix="", limit="1001").status_code == 400
        # A confirmation for another action is no confirmation: only a preview.
        other = _bulk(c, csrf, "retry-now", prefix="", confirm="bulk-pause")
        assert other.status_code == 200
    with scene.sync("orders") as t:
        info = t.group("a")
        assert info is not None
        assert info.state == "parked"


def test_bulk_delete_of_dead_letters_by_kind(scene: Scene) -> None:
    with scene.sync("orders") as t:
        t.publish_many([("a", Event(kind="x")), ("b", Event(kind="y")), ("c", Event(kind="x"))])
        for _ in range(3):
            lease = t.claim()
            assert lease is not None
            assert t.dead_letter(lease, "bad")
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with client(app) as c:
        page = c.get("/queues/orders/dead-letters").text
        assert 'data-action="bulk-delete"' in page
        csrf = csrf_of(page)
        preview = _bulk(c, csrf, "delete", kind="x", prefix="")
        assert "<strong>2</strong> dead letters match" in preview.text
        done = _bulk(c, csrf, "delete", kind="x", prefix="", confirm="bulk-delete")
        location = done.headers["location"]
        assert location.endswith("/dead-letters?done=bulk-delete&matched=2&changed=2")
        assert _done(c.get(location).text) == "bulk delete: deleted 2 of 2 matching dead letters"
    with scene.sync("orders") as t:
        assert [d.group_id for d in t.dead_letters()] == ["b"]
