"""A queue's job history on the dashboard: the history page, a message's story, filters,
paging and the JSON twin (Starlette TestClient, in-memory queues)."""

from __future__ import annotations

import re

from _dash_helpers import Scene
from _dash_helpers import client as dash_client

from pgque.core import Event
from pgque.dashboard import create_app


def _settled(scene: Scene) -> int:
    """Order 42 failed once and then succeeded; three others went through at once."""
    with scene.sync("orders") as t:
        t.set_history("7d")
        message_id = t.publish("order-42", Event(kind="confirm"))
        lease = t.claim(holder="web-1:77:0")
        assert lease is not None
        assert t.nack(lease, error=ValueError("card declined"))
        lease = t.claim(holder="web-2:88:1")
        assert lease is not None
        assert t.ack(lease)
        for n in range(3):
            t.publish(f"order-{n}", Event(kind="receipt"))
            lease = t.claim()
            assert lease is not None
            assert t.ack(lease)
    return message_id


def _rows(page: str) -> list[str]:
    return re.findall(r'<tr data-record="\d+"[^>]*>.*?</tr>', page, re.S)


def test_the_history_page_lists_records_and_leads_to_a_messages_story(scene: Scene) -> None:
    message_id = _settled(scene)
    with dash_client(create_app(transports=[scene.async_("orders")])) as c:
        reply = c.get("/queues/orders/history")
        assert reply.status_code == 200
        page = reply.text
        assert 'href="/queues/orders/history"' in page  # the nav links it
        assert len(_rows(page)) == 5
        assert f'href="/queues/orders/history?message={message_id}"' in page
        story = c.get("/queues/orders/history", params={"message": message_id}).text
        rows = _rows(story)
        assert len(rows) == 2
        assert "acked" in rows[0]
        assert "web-2:88:1" in rows[0]
        assert "nacked" in rows[1]
        assert "ValueError: card declined" in rows[1]
        nacked = c.get("/queues/orders/history", params={"outcome": "nacked"}).text
        assert len(_rows(nacked)) == 1
        receipts = c.get("/queues/orders/history", params={"kind": "receipt"}).text
        assert len(_rows(receipts)) == 3


def test_the_json_history_pages_by_record_id(scene: Scene) -> None:
    _settled(scene)
    with dash_client(create_app(transports=[scene.async_("orders")])) as c:
        seen: list[int] = []
        after: int | None = None
        while True:
            params = {"limit": "2"} if after is None else {"limit": "2", "after": str(after)}
            reply = c.get("/api/queues/orders/history", params=params).json()
            assert reply["supported"] is True
            seen.extend(r["id"] for r in reply["records"])
            if reply["next_after"] is None:
                break
            after = reply["next_after"]
        assert seen == sorted(seen, reverse=True)
        assert len(seen) == 5
        first = c.get("/api/queues/orders/history", params={"group": "order-42"}).json()
        assert [r["outcome"] for r in first["records"]] == ["acked", "nacked"]
        assert first["records"][1]["error"]["message"] == "card declined"
        assert first["records"][0]["duration"] >= 0
        bad = c.get("/api/queues/orders/history", params={"limit": "0"})
        assert bad.status_code == 400
