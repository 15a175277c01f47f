"""The dashboard's pages, fragments and JSON API over in-memory queues (Starlette TestClient)."""

from __future__ import annotations

import html
import re
import time
from urllib.parse import quote

import pytest
from _dash_helpers import HOSTILE_IDS, Scene
from _dash_helpers import client as dash_client
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from pgque.core import Event
from pgque.dashboard import CONTENT_SECURITY_POLICY, create_app
from pgque.dashboard._present import Chart, chart, group_path
from pgque.dashboard._source import Sample


def _block(scene: Scene, group: str, *kinds: str) -> None:
    """Publish *kinds* to *group* and fail its head until the group is blocked."""
    with scene.sync("orders", max_attempts=1, on_exhausted="block") as t:
        for kind in kinds:
            t.publish(group, Event(kind=kind))
        while (lease := t.claim()) is not None:
            t.nack(lease, error="nope")
        info = t.group(group)
        assert info is not None
        assert info.state == "blocked"


def _publish(scene: Scene, queue: str, groups: list[str], per_group: int = 1) -> None:
    with scene.sync(queue) as t:
        for group in groups:
            for i in range(per_group):
                t.publish(group, Event(kind="k", data={"i": i}))


def test_queues_page_shows_every_queue_given_with_its_counts(scene: Scene) -> None:
    _publish(scene, "orders", ["a", "b", "c"], per_group=2)
    _publish(scene, "mail", ["x"])
    app = create_app(transports=[scene.async_("orders"), scene.async_("mail")])
    with dash_client(app) as client:
        page = client.get("/")
        assert page.status_code == 200
        rows = re.findall(r'<tr data-queue="([^"]+)">', page.text)
        assert rows == ["mail", "orders"]
        orders = page.text.split('data-queue="orders"')[1]
        assert 'data-count="messages">6<' in orders
        assert 'data-count="groups">3<' in orders
        # The live part polls its fragment.
        assert 'hx-get="/fragments/queues"' in page.text
        fragment = client.get("/fragments/queues")
        assert fragment.status_code == 200
        assert "<html" not in fragment.text
        assert 'data-count="messages">6<' in fragment.text.split('data-queue="orders"')[1]
        api = client.get("/api/queues").json()
        assert [(q["queue"], q["messages"], q["groups"]) for q in api["queues"]] == [
            ("mail", 1, 1),
            ("orders", 6, 3),
        ]


def test_groups_page_filters_by_state_and_pages_by_keyset(scene: Scene) -> None:
    _publish(scene, "orders", [f"g{i:02d}" for i in range(7)])
    with scene.sync("orders") as t:
        t.pause("g03")
    with dash_client(create_app(transports=[scene.async_("orders")])) as client:
        first = client.get("/api/queues/orders/groups", params={"limit": 3}).json()
        assert [g["group_id"] for g in first["groups"]] == ["g00", "g01", "g02"]
        assert first["next_after"] == "g02"
        second = client.get(
            "/api/queues/orders/groups", params={"limit": 3, "after": first["next_after"]}
        ).json()
        assert [g["group_id"] for g in second["groups"]] == ["g03", "g04", "g05"]
        last = client.get("/api/queues/orders/groups", params={"limit": 3, "after": "g05"}).json()
        assert [g["group_id"] for g in last["groups"]] == ["g06"]
        assert last["next_after"] is None
        paused = client.get("/api/queues/orders/groups", params={"state": "paused"}).json()
        assert [g["group_id"] for g in paused["groups"]] == ["g03"]
        page = client.get("/queues/orders/groups", params={"limit": 3})
        assert "after=g02" in page.text
        assert client.get("/queues/orders/groups", params={"state": "stuck"}).status_code == 400
        assert client.get("/api/queues/orders/groups", params={"limit": 0}).status_code == 400
        assert client.get("/api/queues/orders/groups", params={"limit": "x"}).status_code == 400
        assert client.get("/api/queues/nope/groups").status_code == 404


def test_prefix_search_finds_the_exact_id_and_the_ids_that_start_with_it(scene: Scene) -> None:
    _publish(scene, "orders", ["ten", "tenant", "tenant-1", "tenant-2", "tenanz", "zed", "te"])
    with dash_client(create_app(transports=[scene.async_("orders")])) as client:
        found = client.get("/api/queues/orders/groups", params={"prefix": "tenant"}).json()
        assert [g["group_id"] for g in found["groups"]] == ["tenant", "tenant-1", "tenant-2"]
        paged = client.get(
            "/api/queues/orders/groups", params={"prefix": "tenant", "limit": 1}
        ).json()
        assert [g["group_id"] for g in paged["groups"]] == ["tenant"]
        seen = ["tenant"]
        while paged["next_after"] is not None:
            paged = client.get(
                "/api/queues/orders/groups",
                params={"prefix": "tenant", "limit": 1, "after": paged["next_after"]},
            ).json()
            seen += [g["group_id"] for g in paged["groups"]]
        assert seen == ["tenant", "tenant-1", "tenant-2"]


def test_sort_by_head_age_lists_the_oldest_heads_of_the_whole_queue(scene: Scene) -> None:
    now = [1000.0]
    with scene.sync("orders") as t:
        pass
    clocked = scene.store
    from pgque.core import InMemoryTransport

    t = InMemoryTransport(store=clocked, queue="orders", clock=lambda: now[0])
    # 30 groups whose heads get older as their ids grow: the oldest are on the last id page.
    for n in range(30):
        now[0] = 500.0 - n
        t.publish(f"g{n:02d}", Event(kind="k"))
    now[0] = 100.0
    t.publish("tenant-b", Event(kind="k"))
    now[0] = 50.0
    t.publish("tenant-a", Event(kind="k"))
    assert t.pause("g29")
    ids = r'<td class="id"><a href="[^"]+">([^<]+)</a>'
    with dash_client(create_app(transports=[scene.async_("orders")])) as client:
        page = client.get("/queues/orders/groups", params={"sort": "age", "limit": 4}).text
        assert re.findall(ids, page) == ["tenant-a", "tenant-b", "g29", "g28"]
        assert "groups of the whole queue whose heads waited longest" in page
        assert 'class="next"' not in page
        paused = client.get("/queues/orders/groups", params={"sort": "age", "state": "paused"}).text
        assert re.findall(ids, paused) == ["g29"]
        api = client.get("/api/queues/orders/groups", params={"sort": "age", "limit": 3}).json()
        assert [g["group_id"] for g in api["groups"]] == ["tenant-a", "tenant-b", "g29"]
        # A prefix search pages by id; its page is sorted by age.
        found = client.get("/queues/orders/groups", params={"sort": "age", "prefix": "tenant"})
        assert re.findall(ids, found.text) == ["tenant-a", "tenant-b"]
        assert "Sorted by head age within this page" in found.text
        by_id = client.get("/queues/orders/groups", params={"limit": 2}).text
        assert re.findall(ids, by_id) == ["g00", "g01"]


@pytest.mark.parametrize("group_id", HOSTILE_IDS)
def test_every_group_id_has_a_page_its_link_leads_to(scene: Scene, group_id: str) -> None:
    _publish(scene, "orders", [group_id])
    with dash_client(create_app(transports=[scene.async_("orders")])) as client:
        listing = client.get("/queues/orders/groups").text
        hrefs = re.findall(r'<td class="id"><a href="([^"]+)">', listing)
        assert len(hrefs) == 1
        page = client.get(html.unescape(hrefs[0]))
        assert page.status_code == 200
        title = re.search(r'<h1>Group <span class="id">(.*?)</span></h1>', page.text, re.S)
        assert title is not None
        assert html.unescape(title.group(1)) == group_id
        api_path = "/api" + group_path("orders", group_id)
        assert client.get(api_path).json()["group_id"] == group_id


def test_group_ids_with_slashes_go_through_the_path_converter(scene: Scene) -> None:
    _publish(scene, "orders", ["a/b", "a", "a/b/c"])
    with dash_client(create_app(transports=[scene.async_("orders")])) as client:
        assert client.get("/api/queues/orders/groups/a%2Fb").json()["group_id"] == "a/b"
        # A browser may send the slash as it is: the converter keeps the rest of the path.
        assert client.get("/api/queues/orders/groups/a/b").json()["group_id"] == "a/b"
        assert client.get("/api/queues/orders/groups/a/b/c").json()["group_id"] == "a/b/c"
        assert client.get("/api/queues/orders/groups/a").json()["group_id"] == "a"
        missing = client.get("/api/queues/orders/groups/a/x")
        assert missing.status_code == 404
        assert client.get("/queues/orders/groups/a%2Fx").status_code == 404


def test_group_page_shows_the_head_lease_error_and_the_why_sentence(scene: Scene) -> None:
    with scene.sync("orders", max_attempts=5) as t:
        t.publish("tenant-42", Event(kind="k"))
        lease = t.claim(30.0, holder="host-1:77:0")
        assert lease is not None
        try:
            raise ValueError("card declined <b>")
        except ValueError as exc:
            t.nack(lease, delay=60.0, error=exc)
    with dash_client(create_app(transports=[scene.async_("orders")])) as client:
        page = client.get("/queues/orders/groups/tenant-42").text
        assert "<td>parked</td>" in page
        assert "ValueError: card declined &lt;b&gt;" in page
        assert "Traceback (most recent call last)" in page
        why = re.search(r'<p class="why[^"]*" id="why">([^<]+)</p>', page)
        assert why is not None
        assert html.unescape(why.group(1)).startswith("parked until ")
        assert "after attempt 1 failed with ValueError: card declined <b>" in html.unescape(
            why.group(1)
        )
        api = client.get("/api/queues/orders/groups/tenant-42").json()
        # The relative part ("in 59.9 s") moves between the two requests.
        assert api["why"].split(" after ")[1] == html.unescape(why.group(1)).split(" after ")[1]
        assert api["last_error"]["type"] == "ValueError"


def _dead_letter(scene: Scene, group: str, reason: str, message: str) -> None:
    with scene.sync("orders") as t:
        t.publish(group, Event(kind="k", data={"text": message}, headers={"h": message}))
        lease = t.claim()
        assert lease is not None
        try:
            raise RuntimeError(message)
        except RuntimeError as exc:
            moved = t.dead_letter(lease, reason, error=exc)
        assert moved


def test_dead_letters_page_shows_reason_error_traceback_and_event(scene: Scene) -> None:
    _dead_letter(scene, "g1", "rejected", "boom")
    with dash_client(create_app(transports=[scene.async_("orders")])) as client:
        page = client.get("/queues/orders/dead-letters").text
        assert "<td>rejected</td>" in page
        assert "RuntimeError: boom" in page
        assert "Traceback (most recent call last)" in page
        assert "&#34;text&#34;: &#34;boom&#34;" in page or "&quot;text&quot;" in page
        api = client.get("/api/queues/orders/dead-letters").json()
        assert [(d["group_id"], d["reason"]) for d in api["dead_letters"]] == [("g1", "rejected")]


def test_hostile_text_is_shown_escaped_on_every_page(scene: Scene) -> None:
    for i, text in enumerate(HOSTILE_IDS):
        _dead_letter(scene, text, f"reason {i} {text}"[:2000], text)
        with scene.sync("orders") as t:
            t.publish(text, Event(kind="k"))
    with dash_client(create_app(transports=[scene.async_("orders")], allow_actions=True)) as c:
        pages = [
            c.get("/").text,
            c.get("/queues/orders/groups", params={"limit": 1000}).text,
            c.get("/queues/orders/dead-letters", params={"limit": 1000}).text,
            c.get("/queues/orders/groups", params={"prefix": "<script>"}).text,
        ]
        pages += [c.get(group_path("orders", text)).text for text in HOSTILE_IDS]
    for page in pages:
        # The only script elements are the app's own files, and no markup of the data survived.
        assert re.findall(r"<script[^>]*>", page) == [
            '<script src="/static/htmx.min.js">',
            '<script src="/static/dashboard.js">',
        ], page
        assert "onerror=" not in page.replace("onerror=window.__pwned=3&gt;", "")
        assert "<img" not in page
        assert "<svg onload" not in page


def test_every_answer_carries_the_strict_content_security_policy(scene: Scene) -> None:
    _publish(scene, "orders", ["a"])
    with dash_client(create_app(transports=[scene.async_("orders")])) as client:
        for path in ("/", "/queues/orders/groups", "/nope", "/static/htmx.min.js", "/api/queues"):
            answer = client.get(path)
            assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY, path
            assert answer.headers["x-content-type-options"] == "nosniff"
        assert "script-src 'self'" in CONTENT_SECURITY_POLICY
        assert "unsafe-inline" not in CONTENT_SECURITY_POLICY
        page = client.get("/").text
        # No inline script or style for the CSP to block: every script has a src.
        assert re.findall(r"<script(?![^>]*\bsrc=)", page) == []
        assert " style=" not in page
        assert "<style" not in page


def test_read_only_by_default_no_buttons_and_actions_answer_403(scene: Scene) -> None:
    _dead_letter(scene, "d", "rejected", "x")
    _block(scene, "blocked", "k")
    _publish(scene, "orders", ["a"])
    with dash_client(create_app(transports=[scene.async_("orders")])) as client:
        for path in ("/queues/orders/groups/a", "/queues/orders/groups/blocked"):
            page = client.get(path).text
            assert 'method="post"' not in page
            assert "read-only" in page
        assert 'method="post"' not in client.get("/queues/orders/dead-letters").text
        for act, field in (("pause", "a"), ("unblock", "blocked"), ("redrive", "1")):
            key = "id" if act == "redrive" else "group"
            refused = client.post(f"/queues/orders/actions/{act}", data={key: field, "csrf": "x"})
            assert refused.status_code == 403
            assert "read-only" in refused.text
    with scene.sync("orders") as t:
        a = t.group("a")
        blocked = t.group("blocked")
        assert a is not None
        assert a.state == "ready"
        assert blocked is not None
        assert blocked.state == "blocked"
        assert len(t.dead_letters()) == 1


def test_actions_need_the_csrf_token_of_their_cookie(scene: Scene) -> None:
    _publish(scene, "orders", ["a"])
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with dash_client(app) as client:
        page = client.get("/queues/orders/groups/a")
        assert 'hx-confirm="Pause group a?' in page.text
        token = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
        assert token is not None
        assert client.cookies.get("pgque_csrf")
        # No token, a wrong token, the right token without its cookie: refused.
        assert client.post("/queues/orders/actions/pause", data={"group": "a"}).status_code == 403
        wrong = {"group": "a", "csrf": "0" * 64}
        assert client.post("/queues/orders/actions/pause", data=wrong).status_code == 403
        with dash_client(app) as other:
            other.cookies.set("pgque_csrf", "planted")
            stolen = {"group": "a", "csrf": token.group(1)}
            assert other.post("/queues/orders/actions/pause", data=stolen).status_code == 403
        with scene.sync("orders") as t:
            info = t.group("a")
            assert info is not None
            assert info.state == "ready"
        done = client.post(
            "/queues/orders/actions/pause",
            data={"group": "a", "csrf": token.group(1)},
            follow_redirects=False,
        )
        assert done.status_code == 303
        assert done.headers["location"] == "/queues/orders/groups/a?done=pause"
        after = client.get(done.headers["location"]).text
        assert "paused the group" in after
        assert "<td>paused</td>" in after
    with scene.sync("orders") as t:
        info = t.group("a")
        assert info is not None
        assert info.state == "paused"


def test_each_action_does_what_its_button_says(scene: Scene) -> None:
    _block(scene, "b/1", "first", "second")
    _dead_letter(scene, "d", "rejected", "x")
    _dead_letter(scene, "e", "rejected", "y")
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with dash_client(app) as client:
        token = re.search(r'name="csrf" value="([0-9a-f]+)"', client.get("/").text + "")
        page = client.get("/queues/orders/groups/b%2F1").text
        token = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
        assert token is not None
        csrf = token.group(1)
        assert 'data-action="unblock"' in page
        assert 'data-action="drop-head"' in page

        def post(act: str, **fields: str) -> str:
            answer = client.post(
                f"/queues/orders/actions/{act}",
                data={"csrf": csrf, **fields},
                follow_redirects=False,
            )
            assert answer.status_code == 303, answer.text
            return str(answer.headers["location"])

        assert post("unblock", group="b/1") == "/queues/orders/groups/b%2F1?done=unblock"
        assert post("unblock", group="b/1").endswith("done=noop")
        assert post("pause", group="b/1").endswith("done=pause")
        assert post("resume", group="b/1").endswith("done=resume")
        letters = client.get("/api/queues/orders/dead-letters").json()["dead_letters"]
        first, second = (d["id"] for d in letters)
        assert post("redrive", id=str(first)) == "/queues/orders/dead-letters?done=redrive"
        assert post("delete", id=str(second), confirm=str(second)).endswith("done=delete")
        assert client.get("/api/queues/orders/dead-letters").json()["dead_letters"] == []
        bad = client.post("/queues/orders/actions/redrive", data={"csrf": csrf, "id": "x"})
        assert bad.status_code == 400
        assert client.post("/queues/orders/actions/explode", data={"csrf": csrf}).status_code == 404
    with scene.sync("orders") as t:
        d = t.group("d")
        assert d is not None
        assert d.depth == 1
        assert t.group("e") is None


def test_the_token_guards_every_route_bearer_basic_or_login_cookie(scene: Scene) -> None:
    _publish(scene, "orders", ["a"])
    extra = Route("/metrics", lambda request: PlainTextResponse("pgque_up 1\n"))
    app = create_app(transports=[scene.async_("orders")], token="s3cret", routes=[extra])
    with dash_client(app) as client:
        for path in (
            "/",
            "/api/queues",
            "/static/htmx.min.js",
            "/metrics",
            "/queues/orders/groups",
        ):
            refused = client.get(path)
            assert refused.status_code == 401, path
            assert refused.headers["www-authenticate"].startswith("Basic")
            assert "content-security-policy" in refused.headers
        assert client.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert client.get("/metrics", auth=("any", "s3cret")).text == "pgque_up 1\n"
        assert client.get("/", auth=("any", "nope")).status_code == 401
        assert client.get("/?token=nope").status_code == 401
        login = client.get("/queues/orders/groups?token=s3cret&state=ready", follow_redirects=False)
        assert login.status_code == 303
        assert login.headers["location"] == "/queues/orders/groups?state=ready"
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie
        assert "SameSite=Strict" in cookie
        assert "s3cret" not in cookie
        assert client.get("/queues/orders/groups?state=ready").status_code == 200
    with dash_client(app) as fresh:
        fresh.cookies.set("pgque_token", "s3cret")
        assert fresh.get("/").status_code == 401


def test_mounted_in_another_app_links_and_cookies_carry_the_prefix(scene: Scene) -> None:
    _publish(scene, "orders", ["a/1"])
    dashboard = create_app(transports=[scene.async_("orders")], allow_actions=True, token="t")
    outer = Starlette(
        routes=[
            Route("/", lambda request: PlainTextResponse("my app")),
            Mount("/ops/queues", app=dashboard),
        ]
    )
    with dash_client(outer) as client:
        assert client.get("/").text == "my app"
        login = client.get("/ops/queues/?token=t", follow_redirects=False)
        assert login.headers["location"] == "/ops/queues/"
        assert "Path=/ops/queues" in login.headers["set-cookie"]
        page = client.get("/ops/queues/queues/orders/groups").text
        assert 'href="/ops/queues/queues/orders/groups/a%2F1"' in page
        assert 'src="/ops/queues/static/htmx.min.js"' in page
        group = client.get("/ops/queues/queues/orders/groups/a%2F1")
        assert group.status_code == 200
        token = re.search(r'name="csrf" value="([0-9a-f]+)"', group.text)
        assert token is not None
        assert 'action="/ops/queues/queues/orders/actions/pause"' in group.text
        done = client.post(
            "/ops/queues/queues/orders/actions/pause",
            data={"group": "a/1", "csrf": token.group(1)},
            follow_redirects=False,
        )
        assert done.headers["location"] == "/ops/queues/queues/orders/groups/a%2F1?done=pause"


def test_the_chart_is_the_drop_in_stored_messages_per_second() -> None:
    samples = [
        Sample(at=0.0, messages=100, in_flight=0),
        Sample(at=5.0, messages=50, in_flight=2),
        Sample(at=10.0, messages=60, in_flight=2),
        Sample(at=15.0, messages=0, in_flight=0),
    ]
    drawn = chart(samples)
    assert drawn.latest == 12.0
    assert drawn.peak == 12.0
    points = [tuple(map(float, p.split(","))) for p in drawn.points.split()]
    assert [x for x, _ in points] == [0.0, 80.0, 160.0]
    # 10/s, 0/s (the count grew), 12/s: the highest point is the last.
    assert points[1][1] == 31.0
    assert min(y for _, y in points) == points[2][1]
    assert chart(samples[:1]) == Chart("", None, 0.0, "collecting samples")


def test_samples_are_kept_at_most_once_per_interval(scene: Scene) -> None:
    from pgque.dashboard._source import QueueSource

    now = [0.0]
    source = QueueSource(transports=[scene.async_("orders")], clock=lambda: now[0])
    from pgque.core import QueueStats

    stats = QueueStats(
        groups=0, messages=1, in_flight=0, parked=0, blocked=0, dead_letters=0, oldest_age_s=None
    )
    for at in (0.0, 1.0, 2.9, 3.0, 5.0, 6.5):
        now[0] = at
        source.record("orders", stats)
    assert [s.at for s in source.samples("orders")] == [0.0, 3.0, 6.5]


def test_group_path_encodes_the_id_as_one_segment() -> None:
    assert group_path("q", "a/b c") == "/queues/q/groups/" + quote("a/b c", safe="")
    assert group_path("q", "..") == "/queues/q/group?id=.."


def test_pages_show_the_refreshers_counts_and_it_keeps_them_current(scene: Scene) -> None:
    _publish(scene, "orders", ["a", "b"])
    app = create_app(transports=[scene.async_("orders")], sample_interval=0.05)
    with dash_client(app) as client:
        assert client.get("/api/queues").json()["queues"][0]["messages"] == 2
        _publish(scene, "orders", ["c"])
        # No request reads the counts itself: the refresher's next read shows the third one.
        deadline = time.monotonic() + 5
        while client.get("/api/queues").json()["queues"][0]["messages"] != 3:
            assert time.monotonic() < deadline, "the refresher did not read the new count"
            time.sleep(0.02)
        summary = client.get("/queues/orders/summary").text
        assert 'data-count="messages">3<' in summary
        assert "ago" in summary
