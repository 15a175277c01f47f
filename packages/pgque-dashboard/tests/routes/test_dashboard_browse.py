"""Browse and search on the dashboard: a group's messages behind its head and its scheduled
ones on the group page, one message by id, the overview's search box, and the JSON twins
(Starlette TestClient, in-memory queues)."""

from __future__ import annotations

import re

from _dash_helpers import Scene
from _dash_helpers import client as dash_client

from pgque.core import Event
from pgque.dashboard import create_app


def _rows(page: str) -> list[str]:
    return re.findall(r'<tr data-message="\d+"[^>]*>.*?</tr>', page, re.S)


def _orders(scene: Scene) -> list[int]:
    with scene.sync("orders") as t:
        ids = [
            t.publish("order-42", Event(kind="step", data={"n": n, "text": "y" * 300}))
            for n in range(5)
        ]
        t.publish("order-43", Event(kind="mail"))
        t.publish("order-42", Event(kind="remind"), delay=3600)
    return ids


def test_the_group_page_lists_its_messages_paged_and_its_scheduled_ones(scene: Scene) -> None:
    ids = _orders(scene)
    with dash_client(create_app(transports=[scene.async_("orders")])) as c:
        page = c.get("/queues/orders/groups/order-42").text
        rows = _rows(page)
        assert len(rows) == 5
        assert f'data-message="{ids[0]}" class="head"' in page
        assert "…" in rows[0]  # the preview was cut
        assert 'data-scheduled="' in page
        small = c.get("/queues/orders/groups/order-42", params={"limit": "2"}).text
        assert [int(n) for n in re.findall(r'data-message="(\d+)"', small)] == ids[:2]
        next_link = re.search(r'class="next" href="([^"]+)"', small)
        assert next_link is not None
        rest = c.get(next_link.group(1).replace("&amp;", "&")).text
        assert [int(n) for n in re.findall(r'data-message="(\d+)"', rest)] == ids[2:4]


def test_a_message_page_and_its_json(scene: Scene) -> None:
    ids = _orders(scene)
    with dash_client(create_app(transports=[scene.async_("orders")])) as c:
        page = c.get(f"/queues/orders/messages/{ids[1]}")
        assert page.status_code == 200
        assert "waiting behind its group" in page.text
        reply = c.get(f"/api/queues/orders/messages/{ids[0]}").json()
        assert reply["message"]["is_head"] is True
        assert reply["message"]["truncated"] is True
        assert len(reply["message"]["preview"]) == 200
        gone = c.get("/api/queues/orders/messages/999999")
        assert gone.status_code == 404
        assert c.get("/queues/orders/messages/999999").status_code == 404


def test_the_json_messages_page_by_next_after_and_filter_by_kind(scene: Scene) -> None:
    ids = _orders(scene)
    with dash_client(create_app(transports=[scene.async_("orders")])) as c:
        seen: list[int] = []
        after: int | None = None
        while True:
            params = {"group": "order-42", "limit": "2"}
            if after is not None:
                params["after"] = str(after)
            reply = c.get("/api/queues/orders/messages", params=params).json()
            assert reply["supported"] is True
            seen += [m["message_id"] for m in reply["messages"]]
            if reply["next_after"] is None:
                break
            after = reply["next_after"]
        assert seen == ids
        mail = c.get("/api/queues/orders/messages", params={"kind": "mail"}).json()
        assert [m["group_id"] for m in mail["messages"]] == ["order-43"]
        html = c.get("/queues/orders/messages", params={"kind": "mail"}).text
        assert len(_rows(html)) == 1
        assert c.get("/api/queues/orders/messages", params={"limit": "0"}).status_code == 400


def test_the_overview_search_box_leads_to_the_right_page(scene: Scene) -> None:
    ids = _orders(scene)
    with dash_client(create_app(transports=[scene.async_("orders")])) as c:
        overview = c.get("/").text
        assert 'action="/search"' in overview
        found = c.get(
            "/search",
            params={"queue": "orders", "by": "message", "q": str(ids[2])},
            follow_redirects=False,
        )
        assert found.status_code == 303
        assert found.headers["location"] == f"/queues/orders/messages/{ids[2]}"
        by_kind = c.get("/search", params={"queue": "orders", "by": "kind", "q": "mail"})
        assert len(_rows(by_kind.text)) == 1
        by_prefix = c.get("/search", params={"queue": "orders", "by": "prefix", "q": "order-4"})
        assert "order-42" in by_prefix.text
        assert "order-43" in by_prefix.text
        bad = c.get("/search", params={"queue": "orders", "by": "message", "q": "x"})
        assert bad.status_code == 400
