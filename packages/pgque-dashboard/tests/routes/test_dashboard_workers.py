"""A queue's live workers on the dashboard: the workers page (alive and gone workers, what
each slot holds, the leases a gone worker still holds) and its JSON twin (Starlette
TestClient, in-memory queues)."""

from __future__ import annotations

import re
import time

from _dash_helpers import Scene
from _dash_helpers import client as dash_client

from pgque.core import Event, SlotBeat, WorkerBeat
from pgque.dashboard import create_app


def _workers(scene: Scene) -> int:
    """ "web-1" runs order-42 in slot 0; "gone-1" promised a heartbeat every 0.1 s, holds
    order-7 for ten minutes, and has stopped heartbeating."""
    with scene.sync("orders") as t:
        message_id = t.publish("order-42", Event(kind="confirm"))
        t.publish("order-7", Event(kind="confirm"))
        assert t.claim(600.0, holder="web-1:77:0") is not None
        assert t.claim(600.0, holder="gone:9:3") is not None
        t.heartbeat(WorkerBeat("gone-1", "gone:9", "gone", 9, "0.1.0", 4, 0.1))
        deadline = time.monotonic() + 5
        while [w.id for w in t.workers(include_gone=False)]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        slot = SlotBeat(0, "order-42", message_id, 2.0)
        t.heartbeat(WorkerBeat("web-1", "web-1:77", "web-1", 77, "0.1.0", 8, 60.0, (slot,)))
    return message_id


def _row(page: str, worker: str) -> str:
    found = re.search(rf'<tr data-worker="{worker}"[^>]*>.*?</tr>', page, re.S)
    assert found is not None, worker
    return found.group(0)


def test_the_workers_page_shows_slots_and_a_gone_workers_leases(scene: Scene) -> None:
    message_id = _workers(scene)
    with dash_client(create_app(transports=[scene.async_("orders")])) as c:
        reply = c.get("/queues/orders/workers")
        assert reply.status_code == 200
        page = reply.text
        assert 'href="/queues/orders/workers"' in page  # the nav links it
        alive = _row(page, "web-1")
        assert "alive" in alive
        assert "1/8" in alive
        gone = _row(page, "gone-1")
        assert 'class="gone"' in gone
        assert "0/4" in gone
        assert "slot 0" in page
        assert f'history?message={message_id}"' in page
        assert "running for 2.0 s" in page
        held = re.search(r'<table class="held" data-held="gone-1">.*?</table>', page, re.S)
        assert held is not None
        assert "lease gone:9:3" in held.group(0)
        assert "order-7" in held.group(0)
        only_alive = c.get("/queues/orders/workers", params={"alive": "1"}).text
        assert 'data-worker="gone-1"' not in only_alive
        assert 'data-worker="web-1"' in only_alive


def test_the_json_workers_lists_each_worker_with_its_slots_and_leases(scene: Scene) -> None:
    _workers(scene)
    with dash_client(create_app(transports=[scene.async_("orders")])) as c:
        reply = c.get("/api/queues/orders/workers").json()
        assert reply["supported"] is True
        by_id = {w["id"]: w for w in reply["workers"]}
        assert sorted(by_id) == ["gone-1", "web-1"]
        assert by_id["gone-1"]["alive"] is False
        assert [x["group_id"] for x in by_id["gone-1"]["leases"]] == ["order-7"]
        assert [s["group_id"] for s in by_id["web-1"]["slots"]] == ["order-42"]
        alive = c.get("/api/queues/orders/workers", params={"alive": "1"}).json()
        assert [w["id"] for w in alive["workers"]] == ["web-1"]
