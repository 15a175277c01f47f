"""The fairness keys of a queue on the dashboard: the keys page, its JSON twin, the group
sentence naming a key that holds a ready group back (Starlette TestClient, in-memory queues)."""

from __future__ import annotations

import dataclasses
import re

import pytest
from _dash_helpers import Scene
from _dash_helpers import client as dash_client

from pgque.core import AsyncInMemoryTransport, Event, KeyInfo
from pgque.dashboard import create_app


def _tenants(scene: Scene) -> None:
    """Three keys with policies and a backlog, one of them (acme) at its cap and one (batch)
    out of tokens, the default key with a leased group, and a key with a policy alone."""
    with scene.sync("orders") as t:
        t.set_key_policy("acme", max_in_flight=1)
        t.set_key_policy("batch", rate=1, per=600)
        t.set_key_policy("idle", weight=3)
        for n in (1, 2):
            t.publish(f"acme-{n}", Event(kind="job"), fairness_key="acme")
            t.publish(f"batch-{n}", Event(kind="job"), fairness_key="batch")
        t.publish_many([("solo", Event(kind="job")), ("solo", Event(kind="job"))])
        leases = t.claim_many(10, visibility=300)
        # acme's cap and batch's one token let one group of each out; the default key's too.
        assert sorted(lease.group_id for lease in leases) == ["acme-1", "batch-1", "solo"]


def _row(page: str, key: str) -> str:
    """The table row of *key* on a keys page."""
    found = re.search(rf'<tr data-key="{re.escape(key)}"[^>]*>.*?</tr>', page, re.S)
    assert found is not None, f"no row of key {key!r}"
    return found.group(0)


def test_the_keys_page_shows_each_key_with_its_cap_backlog_policy_and_tokens(
    scene: Scene,
) -> None:
    _tenants(scene)
    # Actions allowed: the keys page still offers none (policies are set with pgque key-policy).
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with dash_client(app) as c:
        reply = c.get("/queues/orders/keys")
        assert reply.status_code == 200
        page = reply.text
        assert re.findall(r'<tr data-key="([^"]*)"', page) == ["", "acme", "batch", "idle"]
        assert 'href="/queues/orders/keys"' in page  # the nav links it
        assert 'hx-get="/queues/orders/summary"' in page  # the queue's live counts
        assert "/actions/" not in page  # read-only
        default = _row(page, "")
        assert "(no key)" in default
        assert 'data-count="in_flight">1<' in default
        assert 'data-count="messages">2<' in default
        assert "weight 1 (default)" in default
        acme = _row(page, "acme")
        assert 'class="at-cap"' in acme  # highlighted: one of one in flight
        assert 'data-count="in_flight">1 of 1<' in acme
        assert 'data-count="groups">2<' in acme
        assert 'data-count="messages">2<' in acme
        assert "weight 1, cap 1<" in acme  # its own policy: no "(default)"
        batch = _row(page, "batch")
        assert "at-cap" not in batch
        assert "weight 1, 1/600s<" in batch
        assert '<td class="n">0.00</td>' in batch  # its one token went to batch-1
        assert re.search(r"UTC \(in (\d+\.\d s|\d+\.\d min)\)", batch)  # the next token
        idle = _row(page, "idle")  # a policy and no group
        assert 'data-count="groups">0<' in idle
        assert "weight 3<" in idle


def test_the_keys_page_and_its_json_page_by_keyset_from_the_default_key(scene: Scene) -> None:
    _tenants(scene)
    with dash_client(create_app(transports=[scene.async_("orders")])) as c:
        seen: list[str] = []
        after: str | None = None
        while True:
            params = {"limit": "1"} if after is None else {"limit": "1", "after": after}
            reply = c.get("/api/queues/orders/keys", params=params).json()
            assert reply["queue"] == "orders"
            assert reply["supported"] is True
            seen.extend(k["key"] for k in reply["keys"])
            if reply["next_after"] is None:
                break
            after = reply["next_after"]
        # The default key "" comes first; its page's next_after is "" (present, not null).
        assert seen == ["", "acme", "batch", "idle"]
        acme = c.get("/api/queues/orders/keys", params={"limit": 2}).json()["keys"][1]
        assert acme["key"] == "acme"
        assert (acme["in_flight"], acme["groups"], acme["messages"]) == (1, 2, 2)
        assert acme["own_policy"] is True
        assert acme["policy"]["max_in_flight"] == 1
        assert acme["oldest_age_s"] >= 0
        batch = c.get("/api/queues/orders/keys", params={"after": "acme"}).json()
        assert [k["key"] for k in batch["keys"]] == ["batch", "idle"]
        assert batch["next_after"] is None
        assert batch["keys"][0]["next_token_at"] is not None  # epoch seconds, as the model's

        first = c.get("/queues/orders/keys", params={"limit": 1}).text
        assert re.findall(r'<tr data-key="([^"]*)"', first) == [""]
        assert 'href="/queues/orders/keys?limit=1&amp;after="' in first
        assert "first page" not in first
        second = c.get("/queues/orders/keys", params={"limit": 1, "after": ""}).text
        assert re.findall(r'<tr data-key="([^"]*)"', second) == ["acme"]
        assert 'href="/queues/orders/keys?limit=1&amp;after=acme"' in second
        assert 'href="/queues/orders/keys?limit=1">first page' in second
        last = c.get("/queues/orders/keys", params={"after": "idle"}).text
        assert "no keys after idle" in last
        assert "next page" not in last

        for bad in ({"limit": 0}, {"limit": 1001}, {"limit": "x"}, {"after": "k" * 201}):
            assert c.get("/api/queues/orders/keys", params=bad).status_code == 400, bad
            assert c.get("/queues/orders/keys", params=bad).status_code == 400, bad
        assert "error" in c.get("/api/queues/orders/keys", params={"limit": 0}).json()
        assert c.get("/api/queues/nope/keys").status_code == 404
        assert c.get("/queues/nope/keys").status_code == 404


def test_the_keys_routes_need_the_token(scene: Scene) -> None:
    _tenants(scene)
    app = create_app(transports=[scene.async_("orders")], token="s3cret")
    with dash_client(app) as c:
        assert c.get("/api/queues/orders/keys").status_code == 401
        assert c.get("/queues/orders/keys").status_code == 401
        bearer = {"Authorization": "Bearer s3cret"}
        reply = c.get("/api/queues/orders/keys", headers=bearer)
        assert reply.status_code == 200
        assert "default-src 'none'" in reply.headers["content-security-policy"]


def test_hostile_keys_are_shown_as_text(scene: Scene) -> None:
    hostile = '<img src=x onerror="window.__pwned=1">'
    with scene.sync("orders") as t:
        t.publish("g", Event(kind="k"), fairness_key=hostile)
    with dash_client(create_app(transports=[scene.async_("orders")])) as c:
        page = c.get("/queues/orders/keys").text
        assert "<img" not in page
        assert "&lt;img src=x onerror=" in page


class _Unfair(AsyncInMemoryTransport):
    """The in-memory transport as a backend without fairness keys."""

    CAPABILITIES = dataclasses.replace(AsyncInMemoryTransport.CAPABILITIES, fairness=False)


def test_a_backend_without_fairness_keys_gets_a_note_not_a_table(scene: Scene) -> None:
    _tenants(scene)
    unfair = _Unfair(store=scene.store, queue="orders")
    assert not unfair.capabilities.fairness
    with dash_client(create_app(transports=[unfair])) as c:
        reply = c.get("/queues/orders/keys")
        assert reply.status_code == 200
        assert "does not support fairness keys" in reply.text
        assert "<table" not in reply.text
        api = c.get("/api/queues/orders/keys").json()
        assert api == {"queue": "orders", "supported": False, "keys": [], "next_after": None}
        # The group page neither asks for the key nor shows one.
        group = c.get("/queues/orders/groups/acme-2").text
        assert "fairness key" not in group
        why = c.get("/api/queues/orders/groups/acme-2").json()["why"]
        assert why.startswith("ready: ")
        assert "its key" not in why


def test_the_group_sentence_names_the_key_holding_a_ready_group_back(scene: Scene) -> None:
    _tenants(scene)
    with scene.sync("orders") as t:
        t.publish("other", Event(kind="job"))  # the default key: no cap, no rate
    with dash_client(create_app(transports=[scene.async_("orders")])) as c:
        capped = c.get("/api/queues/orders/groups/acme-2").json()
        assert capped["state"] == "ready"
        assert capped["fairness_key"] == "acme"
        assert capped["why"].startswith(
            "ready, but its key acme has 1 of 1 in flight: it waits until one of them is "
            "settled or its lease expires"
        )
        limited = c.get("/api/queues/orders/groups/batch-2").json()["why"]
        assert limited.startswith("ready, but its key batch is out of tokens (1 per 600 s)")
        free = c.get("/api/queues/orders/groups/other").json()["why"]
        assert free.startswith("ready: ")
        assert "its key" not in free
        page = c.get("/queues/orders/groups/acme-2").text
        why = re.search(r'<p class="why[^"]*" id="why">([^<]*)</p>', page)
        assert why is not None
        assert why.group(1).startswith("ready, but its key acme has 1 of 1 in flight")
        assert re.search(
            r'<th>fairness key</th><td><a class="id" href="/queues/orders/keys">acme</a>', page
        )
        default = c.get("/queues/orders/groups/other").text
        assert '<a class="id" href="/queues/orders/keys">(no key)</a>' in default
        # A leased group's sentence is about its lease, whatever its key.
        leased = c.get("/api/queues/orders/groups/acme-1").json()["why"]
        assert leased.startswith("leased by ")


def test_the_group_page_reads_the_key_only_when_a_policy_can_hold_the_group_back(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Reading a key counts its groups (every group of the queue for the default key): the page
    # asks only when the key's policy has a cap or a rate, its own or the queue's default.
    with scene.sync("orders") as t:
        t.set_key_policy("acme", weight=2)  # a policy, but nothing that holds a group back
        t.publish("free", Event(kind="job"))
        t.publish("acme-1", Event(kind="job"), fairness_key="acme")
    transport = scene.async_("orders")
    asked: list[str] = []
    real = transport.key_info

    async def key_info(key: str) -> KeyInfo | None:
        asked.append(key)
        return await real(key)

    monkeypatch.setattr(transport, "key_info", key_info)
    with dash_client(create_app(transports=[transport])) as c:
        assert c.get("/api/queues/orders/groups/free").json()["why"].startswith("ready: ")
        assert c.get("/api/queues/orders/groups/acme-1").json()["why"].startswith("ready: ")
        assert asked == []
        with scene.sync("orders") as t:
            t.set_key_policy(None, max_in_flight=1)  # the queue's default: a cap for every key
            t.publish("other", Event(kind="job"))
            assert t.claim(visibility=300) is not None
        why = c.get("/api/queues/orders/groups/other").json()["why"]
        assert asked == [""]
        assert why.startswith("ready, but its key (no key) has 1 of 1 in flight"), why
