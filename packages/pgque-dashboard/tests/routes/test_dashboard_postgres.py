"""The dashboard over a real PostgreSQL database, served from its URL (``create_app(URL)``)."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from _dash_helpers import client
from psycopg import sql

from pgque.core import Event, connect
from pgque.dashboard import create_app

#: Names no queue may have, as an older version or a hand-written INSERT might have stored them.
_BAD_NAMES = ("bad name!", '<img src=x onerror="window.__pwned=1">', "9lives")


@pytest.fixture
def database(postgres_url: str) -> Iterator[str]:
    """The URL of a new database of the test server (its own list of queues), dropped after."""
    name = f"pgque_dash_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlunsplit(urlsplit(postgres_url)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def test_a_bad_queue_name_in_the_database_is_marked_unreadable_not_a_503(database: str) -> None:
    with connect(database, queue="orders") as orders:
        orders.publish("a", Event(kind="k"))
        orders.publish("b", Event(kind="k"))
    with connect(database, queue="mail") as mail:
        mail.publish("x", Event(kind="k"))
    with psycopg.connect(database, autocommit=True) as conn:
        for name in _BAD_NAMES:  # one group of each (the queues() listing reads groups)
            conn.execute(
                "INSERT INTO pgque_fifo.groups (queue, group_id, priority) VALUES (%s, 'g', 0)",
                (name,),
            )
    with client(create_app(database, sample_interval=0.05)) as c:
        for path in ("/", "/fragments/queues"):
            page = c.get(path)
            assert page.status_code == 200, page.text
            rows = re.findall(r'<tr data-queue="([^"]*)"([^>]*)>', page.text)
            shown = dict(rows)
            assert 'class="unreadable"' not in shown["orders"]
            assert 'data-count="messages">2<' in page.text.split('data-queue="orders"')[1]
            assert 'data-count="messages">1<' in page.text.split('data-queue="mail"')[1]
            assert shown["bad name!"] == ' class="unreadable"'
            assert shown["9lives"] == ' class="unreadable"'
            bad = page.text.split('data-queue="bad name!"')[1].split("</tr>")[0]
            assert "unreadable: invalid queue name" in bad
            assert "<a " not in bad  # no link to pages that cannot be read
            assert '<img src=x onerror="window.__pwned=1">' not in page.text
            assert "&lt;img src=x onerror=" in page.text
        api = c.get("/api/queues")
        assert api.status_code == 200
        body = api.json()
        assert [(q["queue"], q["messages"]) for q in body["queues"]] == [
            ("mail", 1),
            ("orders", 2),
        ]
        unreadable = {u["queue"]: u["error"] for u in body["unreadable"]}
        assert set(unreadable) == set(_BAD_NAMES)
        assert all(error.startswith("invalid queue name") for error in unreadable.values())
        # The refresher reads the queues after a bad one too, and does not call that a failure.
        with connect(database, queue="orders") as orders:
            orders.publish("c", Event(kind="k"))
        deadline = time.monotonic() + 10
        while "orders" not in {
            q["queue"] for q in c.get("/api/queues").json()["queues"] if q["messages"] == 3
        }:
            assert time.monotonic() < deadline, "the refresher did not read orders again"
            time.sleep(0.05)
        assert "The last read failed" not in c.get("/").text


def test_only_the_queues_of_the_database_are_shown_not_a_default_one(database: str) -> None:
    with connect(database, queue="mail") as mail:
        mail.publish("x", Event(kind="k"))
    with client(create_app(database)) as c:
        assert [q["queue"] for q in c.get("/api/queues").json()["queues"]] == ["mail"]
        page = c.get("/").text
        assert re.findall(r'<tr data-queue="([^"]*)"', page) == ["mail"]
        assert c.get("/queues/default/groups").status_code == 404
    # The queue the URL names is the operator's choice: shown, even before it holds anything.
    named = database + "?queue=orders"
    with client(create_app(named)) as c:
        listed = [(q["queue"], q["messages"]) for q in c.get("/api/queues").json()["queues"]]
        assert listed == [("mail", 1), ("orders", 0)]
        assert c.get("/queues/orders/groups").status_code == 200
    # An empty database: no queue at all, and the page says so.
    with connect(database, queue="mail") as mail:
        mail.purge()  # type: ignore[attr-defined]
    with client(create_app(database)) as c:
        assert c.get("/api/queues").json()["queues"] == []
        assert "no queue holds messages, dead letters or scheduled messages" in c.get("/").text


def test_the_keys_page_follows_the_backend_s_fairness_capability(database: str) -> None:
    """PostgreSQL read from its URL: the keys page is a table when the backend declares
    ``Capabilities.fairness``, else the note; the JSON says which, and a ready group's sentence
    names no key on a backend without them."""
    with connect(database, queue="orders") as orders:
        orders.publish("a", Event(kind="k"))
        fair = orders.capabilities.fairness
    with client(create_app(database)) as c:
        page = c.get("/queues/orders/keys")
        assert page.status_code == 200
        api = c.get("/api/queues/orders/keys").json()
        assert api["supported"] is fair
        if fair:
            assert [k["key"] for k in api["keys"]] == [""]
            assert '<tr data-key="">' in page.text
        else:
            assert api["keys"] == []
            assert api["next_after"] is None
            assert "does not support fairness keys" in page.text
            why = c.get("/api/queues/orders/groups/a").json()["why"]
            assert why.startswith("ready: ")


def test_a_drained_queue_with_history_or_live_workers_still_has_its_pages(database: str) -> None:
    """``queues()`` lists the queues holding messages, dead letters or scheduled messages; a
    queue that drained before this dashboard first listed it still answers by its history
    and its live workers, and a name with neither stays a 404."""
    with connect(database, queue="orders") as orders:
        orders.set_history("7d")  # type: ignore[attr-defined]
        orders.publish("order-42", Event(kind="confirm"))
        lease = orders.claim()
        assert lease is not None
        assert orders.ack(lease)
        assert orders.stats().messages == 0
    with client(create_app(database)) as c:
        assert c.get("/api/queues").json()["queues"] == []
        page = c.get("/queues/orders/history")
        assert page.status_code == 200, page.text
        assert len(re.findall(r'<tr data-record="\d+"', page.text)) == 1
        assert c.get("/queues/nothing/history").status_code == 404
        assert c.get("/queues/nothing/groups").status_code == 404
