"""The dashboard's security checks against hostile requests (Starlette TestClient, in-memory
queues): hostile CSRF fields and cookies, the headers of errors, WebSockets, the login's
redirect."""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
from collections.abc import Coroutine
from typing import Any
from urllib.parse import quote

import pytest
from _dash_helpers import BASE, Scene, client, csrf_of
from markupsafe import escape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.testclient import TestClient
from starlette.websockets import WebSocket, WebSocketDisconnect

from pgque.core import Event
from pgque.dashboard import CONTENT_SECURITY_POLICY, create_app
from pgque.dashboard._security import Message, Receive, Scope, SecurityMiddleware, Send


def _run(call: Coroutine[Any, Any, None]) -> None:
    """Run *call* to its end in a thread of its own (its own event loop, whatever loop this
    thread runs: the browser tests' Playwright keeps one running)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, call).result()


def _publish(scene: Scene, *groups: str) -> None:
    with scene.sync("orders") as t:
        for group in groups:
            t.publish(group, Event(kind="k"))


def _state(scene: Scene, group: str) -> str:
    with scene.sync("orders") as t:
        info = t.group(group)
        assert info is not None
        return info.state


def _assert_security_headers(answer: Any, what: str) -> None:
    headers = answer.headers
    assert headers.get("content-security-policy") == CONTENT_SECURITY_POLICY, what
    assert "frame-ancestors 'none'" in headers["content-security-policy"], what
    assert headers.get("x-content-type-options") == "nosniff", what
    assert headers.get("referrer-policy") == "no-referrer", what
    assert headers.get("x-frame-options") == "DENY", what


# -- hostile CSRF fields and cookies: refused, never a 500 --------------------------------------


@pytest.mark.parametrize("field", ["é" * 64, "日本語", "\u2028", "0" * 63 + "\u0660"])
def test_a_non_ascii_csrf_field_is_refused_403(scene: Scene, field: str) -> None:
    _publish(scene, "a")
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with client(app, raise_server_exceptions=False) as c:
        csrf_of(c.get("/queues/orders/groups/a").text)  # sets the CSRF cookie
        answer = c.post("/queues/orders/actions/pause", data={"group": "a", "csrf": field})
        assert answer.status_code == 403, answer.text
        assert "CSRF" in answer.text
    assert _state(scene, "a") == "ready"


def test_a_non_ascii_csrf_cookie_is_refused_403(scene: Scene) -> None:
    _publish(scene, "a")
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with client(app, raise_server_exceptions=False) as c:
        token = csrf_of(c.get("/queues/orders/groups/a").text)
        c.cookies.clear()
        answer = c.post(
            "/queues/orders/actions/pause",
            data={"group": "a", "csrf": token},
            headers={"cookie": "pgque_csrf=\xe9t\xe9".encode("latin-1")},
        )
        assert answer.status_code == 403, answer.text
    assert _state(scene, "a") == "ready"


@pytest.mark.parametrize(
    "headers",
    [
        {"cookie": "pgque_token=\xe9\xe9".encode("latin-1")},
        {"cookie": "pgque_token=caf\xc3\xa9; other=1".encode("latin-1")},
        {"cookie": b"pgque_token"},
        {"cookie": b"pgque_token=; pgque_token=x"},
        {"authorization": "Basic \xe9\xe9\xe9\xe9".encode("latin-1")},
        {"authorization": "Bearer \xe9".encode("latin-1")},
        {"authorization": b"Bearer"},
        {"authorization": b"Basic"},
    ],
    ids=lambda headers: repr(headers),
)
def test_an_odd_cookie_or_authorization_without_the_token_is_refused_401(
    scene: Scene, headers: dict[str, bytes]
) -> None:
    app = create_app(transports=[scene.async_("orders")], token="s3cret")
    with client(app, raise_server_exceptions=False) as c:
        answer = c.get("/api/queues", headers=headers)
        assert answer.status_code == 401, answer.text
        _assert_security_headers(answer, "401")


def test_a_non_ascii_token_in_the_login_address_is_refused_401(scene: Scene) -> None:
    app = create_app(transports=[scene.async_("orders")], token="s3cret")
    with client(app, raise_server_exceptions=False) as c:
        assert c.get("/?token=%C3%A9t%C3%A9").status_code == 401
        assert c.get("/?token=%FF%FE").status_code == 401


# -- errors carry the security headers ------------------------------------------------------------


def test_a_500_carries_the_security_headers(scene: Scene) -> None:
    async def boom(request: Request) -> Response:
        raise RuntimeError("a bug in a route")

    extra = [Route("/boom", boom)]
    for token in (None, "s3cret"):
        app = create_app(transports=[scene.async_("orders")], token=token, routes=extra)
        with client(app, raise_server_exceptions=False) as c:
            answer = c.get("/boom", headers={"Authorization": "Bearer s3cret"})
            assert answer.status_code == 500
            assert "a bug in a route" not in answer.text  # no traceback for the visitor
            _assert_security_headers(answer, f"500 with token={token}")


def test_a_500_of_a_dashboard_route_carries_the_security_headers(scene: Scene) -> None:
    class Broken:
        """A transport whose groups() fails with something that is not a PgqueError."""

        def __init__(self, inner: object) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> object:
            return getattr(self._inner, name)

        async def groups(self, **_options: object) -> list[object]:
            raise RuntimeError("the driver broke")

    app = create_app(transports=[Broken(scene.async_("orders"))])  # type: ignore[list-item]
    with client(app, raise_server_exceptions=False) as c:
        for path in ("/queues/orders/groups", "/api/queues/orders/groups"):
            answer = c.get(path)
            assert answer.status_code == 500, path
            _assert_security_headers(answer, path)


# -- WebSockets and other non-HTTP scopes need the token too -------------------------------------


#: Where the WebSocket tests connect (TestClient.websocket_connect ignores base_url).
WS = BASE.replace("http:", "ws:", 1)


async def _echo(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_text("hello")
    await websocket.close()


def test_a_websocket_route_needs_the_token(scene: Scene) -> None:
    app = create_app(
        transports=[scene.async_("orders")],
        token="s3cret",
        routes=[WebSocketRoute("/ws", _echo)],
    )
    with client(app) as c:
        with pytest.raises(WebSocketDisconnect) as refused, c.websocket_connect(WS + "/ws") as ws:
            ws.receive_text()
        assert refused.value.code == 1008
        bearer = {"Authorization": "Bearer s3cret"}
        with c.websocket_connect(WS + "/ws", headers=bearer) as ws:
            assert ws.receive_text() == "hello"


def test_mounted_in_another_app_a_websocket_route_needs_the_token(scene: Scene) -> None:
    dashboard = create_app(
        transports=[scene.async_("orders")],
        token="s3cret",
        routes=[WebSocketRoute("/ws", _echo)],
    )
    outer = Starlette(routes=[Mount("/ops", app=dashboard)])
    with TestClient(outer, base_url=BASE) as c:
        with (
            pytest.raises(WebSocketDisconnect) as refused,
            c.websocket_connect(WS + "/ops/ws") as ws,
        ):
            ws.receive_text()
        assert refused.value.code == 1008
        wrong = {"Authorization": "Bearer wrong"}
        with pytest.raises(WebSocketDisconnect), c.websocket_connect(WS + "/ops/ws", headers=wrong):
            pass
        # No login by address for a WebSocket: a browser's WebSocket sends the login cookie.
        with pytest.raises(WebSocketDisconnect), c.websocket_connect(WS + "/ops/ws?token=s3cret"):
            pass
        login = c.get("/ops/?token=s3cret", follow_redirects=False)
        assert login.status_code == 303
        with c.websocket_connect(WS + "/ops/ws") as ws:  # the login cookie is enough
            assert ws.receive_text() == "hello"


def test_a_scope_of_another_type_without_the_token_never_reaches_the_app() -> None:
    reached: list[str] = []

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        reached.append(str(scope["type"]))

    async def receive() -> Message:
        return {"type": "x"}

    async def send(message: Message) -> None:
        pass

    guarded = SecurityMiddleware(inner, token="s3cret")
    bearer = [(b"authorization", b"Bearer s3cret"), (b"host", b"127.0.0.1")]
    _run(guarded({"type": "webtransport", "headers": []}, receive, send))
    _run(guarded({"type": "future", "headers": [(b"host", b"127.0.0.1")]}, receive, send))
    assert reached == []
    _run(guarded({"type": "future", "headers": bearer}, receive, send))
    _run(guarded({"type": "lifespan"}, receive, send))
    assert reached == ["future", "lifespan"]


# -- the ?token= login redirects to a path of this site only ------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "//evil.example/x",
        "//evil.example",
        "///evil.example/x",
        "/%2F%2Fevil.example/x",
        "/%2Fevil.example",
        "/%2F%5Cevil.example",
    ],
)
def test_the_login_never_redirects_to_another_site(scene: Scene, address: str) -> None:
    app = create_app(transports=[scene.async_("orders")], token="s3cret")
    with client(app) as c:
        login = c.get(f"{BASE}{address}?token=s3cret", follow_redirects=False)
        assert login.status_code == 303
        assert login.headers["location"] == "/", address
        assert "pgque_token=" in login.headers["set-cookie"]


def test_the_login_keeps_a_path_of_this_site_and_its_query(scene: Scene) -> None:
    app = create_app(transports=[scene.async_("orders")], token="s3cret")
    with client(app) as c:
        for address, expected in (
            ("/queues/orders/groups?token=s3cret&state=ready", "/queues/orders/groups?state=ready"),
            ("/queues/orders/groups/a%2F%2Fb?token=s3cret", "/queues/orders/groups/a//b"),
            ("/?token=s3cret", "/"),
            # A backslash is percent-encoded: never the /\\host a browser reads as //host.
            ("/%5Cevil.example?token=s3cret", "/%5Cevil.example"),
            ("/%5C%5Cevil.example?token=s3cret", "/%5C%5Cevil.example"),
        ):
            c.cookies.clear()  # no login cookie: every address logs in
            login = c.get(address, follow_redirects=False)
            assert login.status_code == 303
            assert login.headers["location"] == expected, address


@pytest.mark.parametrize(
    "location",
    [
        "//evil.example/x",
        "/\\evil.example",
        "/\\/evil.example",
        "\\\\evil.example",
        "http://evil.example/",
        "https:evil.example",
        "javascript:alert(1)",
        "evil.example/x",
        "",
        "/ok\r\nSet-Cookie: x=1",
        "/x\x00",
    ],
)
def test_same_site_path_refuses_every_other_address(location: str) -> None:
    from pgque.dashboard._security import same_site_path

    assert same_site_path(location, "/") == "/"
    assert same_site_path(location, "/ops/") == "/ops/"


def test_same_site_path_keeps_a_path_of_this_site() -> None:
    from pgque.dashboard._security import same_site_path

    for location in ("/", "/x", "/queues/orders/groups?state=ready", "/a%2F%2Fb", "/%5Cx"):
        assert same_site_path(location, "/") == location


# -- only the chosen Host names; no cross-site request changes anything --------------------------

_SERVED = ["127.0.0.1", "127.0.0.1:8000", "localhost", "LocalHost:1", "[::1]", "[::1]:8000"]
_FOREIGN = [
    "evil.example",
    "evil.example:8000",
    "127.0.0.1.evil.example",
    "localhost.evil.example:80",
    "localhost.",
    "testserver",
    "0.0.0.0",
    "::1",
    "[::1",
    "[::2]",
    "127.0.0.1:",
    "127.0.0.1:http",
    "127.0.0.1:80:80",
    "ops@127.0.0.1",
    "127.0.0.1/x",
    "127.0.0.1 ",
    " ",
]


def test_only_the_loopback_names_are_served_by_default(scene: Scene) -> None:
    app = create_app(transports=[scene.async_("orders")])
    with client(app) as c:
        for host in _SERVED:
            assert c.get("/api/queues", headers={"host": host}).status_code == 200, host
        for host in _FOREIGN:
            refused = c.get("/api/queues", headers={"host": host})
            assert refused.status_code == 400, host
            assert "--allowed-host" in refused.text
            _assert_security_headers(refused, host)
        # A refused Host learns nothing else: not the login, not a page, not a static file.
        for path in ("/", "/static/htmx.min.js", "/?token=x", "/nope"):
            assert c.get(path, headers={"host": "evil.example"}).status_code == 400, path


def test_a_request_without_one_host_header_is_refused_400(scene: Scene) -> None:
    app = create_app(transports=[scene.async_("orders")])
    answers: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        answers.append(message)

    def status(headers: list[tuple[bytes, bytes]]) -> object:
        answers.clear()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.0",
            "method": "GET",
            "scheme": "http",
            "path": "/api/queues",
            "raw_path": b"/api/queues",
            "root_path": "",
            "query_string": b"",
            "headers": headers,
            "client": ("127.0.0.1", 1234),
            "server": ("127.0.0.1", 8000),
        }
        _run(app(scope, receive, send))
        return answers[0]["status"]

    assert status([(b"host", b"127.0.0.1")]) == 200
    assert status([]) == 400
    assert status([(b"host", b"127.0.0.1"), (b"host", b"evil.example")]) == 400
    assert status([(b"host", b"127.0.0.1"), (b"host", b"127.0.0.1")]) == 400


def test_allowed_hosts_names_the_hosts_served(scene: Scene) -> None:
    app = create_app(
        transports=[scene.async_("orders")],
        allowed_hosts=["ops.example.com", "[2001:db8::1]", "10.0.0.7", "Dash.Internal"],
    )
    with client(app) as c:
        for host in (
            "ops.example.com",
            "OPS.example.com:443",
            "[2001:db8:0::1]:8000",
            "[2001:DB8::1]",
            "10.0.0.7:8000",
            "dash.internal",
        ):
            assert c.get("/api/queues", headers={"host": host}).status_code == 200, host
        for host in ("127.0.0.1", "localhost", "[::1]", "example.com", "x.ops.example.com"):
            assert c.get("/api/queues", headers={"host": host}).status_code == 400, host


@pytest.mark.parametrize(
    "names",
    [["ops.example.com:8000"], [""], ["*"], ["http://ops.example.com"], ["a b"], ["[::1"]],
)
def test_allowed_hosts_refuses_what_is_not_a_host_name(scene: Scene, names: list[str]) -> None:
    with pytest.raises(ValueError, match="allowed host"):
        create_app(transports=[scene.async_("orders")], allowed_hosts=names)


def test_a_websocket_for_another_host_or_from_another_site_is_closed(scene: Scene) -> None:
    app = create_app(transports=[scene.async_("orders")], routes=[WebSocketRoute("/ws", _echo)])
    with client(app) as c:
        with c.websocket_connect(WS + "/ws") as ws:
            assert ws.receive_text() == "hello"
        same = {"origin": BASE}
        with c.websocket_connect(WS + "/ws", headers=same) as ws:
            assert ws.receive_text() == "hello"
        for headers in (
            {"host": "evil.example"},
            {"origin": "http://evil.example"},
            {"origin": "null"},
            {"sec-fetch-site": "cross-site"},
        ):
            with pytest.raises(WebSocketDisconnect) as refused:
                with c.websocket_connect(WS + "/ws", headers=dict(headers)):
                    pass
            assert refused.value.code == 1008, headers


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://evil.example"},
        {"origin": "https://127.0.0.1.evil.example"},
        {"origin": "http://127.0.0.1:8000"},  # another port is another origin
        {"origin": "null"},
        {"origin": "null", "sec-fetch-site": "same-site"},
        {"origin": "http://evil.example", "sec-fetch-site": "same-origin"},
        {"origin": "http://127.0.0.1/path"},
        {"origin": "file://"},
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},
        {"origin": BASE, "sec-fetch-site": "cross-site"},
    ],
)
def test_a_cross_site_action_is_refused_403_even_with_a_valid_csrf_token(
    scene: Scene, headers: dict[str, str]
) -> None:
    _publish(scene, "a")
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with client(app) as c:
        csrf = csrf_of(c.get("/queues/orders/groups/a").text)
        refused = c.post(
            "/queues/orders/actions/pause",
            data={"group": "a", "csrf": csrf},
            headers=headers,
            follow_redirects=False,
        )
        assert refused.status_code == 403, refused.text
        assert "cross-site" in refused.text
        _assert_security_headers(refused, "403")
    assert _state(scene, "a") == "ready"


def test_a_same_origin_action_is_accepted(scene: Scene) -> None:
    _publish(scene, "a", "b", "c", "d")
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with client(app) as c:
        csrf = csrf_of(c.get("/queues/orders/groups/a").text)
        for group, headers in (
            ("a", {"origin": BASE, "sec-fetch-site": "same-origin"}),
            ("b", {"sec-fetch-site": "none"}),  # typed into the address bar, a bookmark
            # A form posted without htmx: under Referrer-Policy: no-referrer, Chromium sends
            # Origin: null, and Sec-Fetch-Site says where it came from.
            ("d", {"origin": "null", "sec-fetch-site": "same-origin"}),
            ("c", {"origin": "http://LOCALHOST:8000", "host": "localhost:8000"}),
        ):
            done = c.post(
                "/queues/orders/actions/pause",
                data={"group": group, "csrf": csrf},
                headers=headers,
                follow_redirects=False,
            )
            assert done.status_code == 303, (headers, done.text)
    for group in ("a", "b", "c", "d"):
        assert _state(scene, group) == "paused"


def test_routes_added_to_the_app_are_guarded_from_cross_site_writes_too(scene: Scene) -> None:
    calls: list[str] = []

    async def write(request: Request) -> Response:
        calls.append(request.method)
        return Response("done")

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    app = create_app(
        transports=[scene.async_("orders")], routes=[Route("/w", write, methods=methods)]
    )
    with client(app) as c:
        evil = {"origin": "http://evil.example", "sec-fetch-site": "cross-site"}
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            assert c.request(method, "/w", headers=evil).status_code == 403, method
        assert calls == []
        # A read is no write: a cross-site GET is answered (what it reads, the page cannot).
        assert c.get("/w", headers=evil).status_code == 200
        assert c.post("/w", headers={"origin": BASE}).status_code == 200
        assert calls == ["GET", "POST"]


# -- destructive actions need their confirmation, on the server too ------------------------------


def _blocked_and_dead(scene: Scene, group: str) -> int:
    """Block *group* (its head exhausted) and dead-letter another group's head; return the
    dead letter's id."""
    with scene.sync("orders", max_attempts=1, on_exhausted="block") as t:
        t.publish(group, Event(kind="k"))
        while (lease := t.claim()) is not None:  # the claim after the last attempt blocks it
            t.nack(lease, error="nope")
        info = t.group(group)
        assert info is not None
        assert info.state == "blocked"
    with scene.sync("orders") as t:
        t.publish("dead", Event(kind="k"))
        lease = t.claim()
        assert lease is not None
        assert t.dead_letter(lease, "rejected")
        (letter,) = t.dead_letters()
        return letter.id


def test_destructive_actions_need_the_confirmation_of_what_they_destroy(scene: Scene) -> None:
    group = "tenant/7\u00e9"
    letter = _blocked_and_dead(scene, group)
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with client(app) as c:
        csrf = csrf_of(c.get("/queues/orders/dead-letters").text)

        def post(act: str, **fields: str) -> Any:
            return c.post(
                f"/queues/orders/actions/{act}",
                data={"csrf": csrf, **fields},
                follow_redirects=False,
            )

        for confirm in (None, "", "tenant/7", group.upper(), f" {group}", "yes"):
            fields = {"group": group} if confirm is None else {"group": group, "confirm": confirm}
            refused = post("drop-head", **fields)
            assert refused.status_code == 400, (confirm, refused.text)
            assert "confirm" in refused.text
            assert "group id" in refused.text
        for confirm in (None, "", str(letter + 1), f"#{letter}", "yes"):
            fields = {"id": str(letter)}
            if confirm is not None:
                fields["confirm"] = confirm
            refused = post("delete", **fields)
            assert refused.status_code == 400, (confirm, refused.text)
            assert "dead letter" in refused.text
        # Nothing was destroyed.
        with scene.sync("orders") as t:
            info = t.group(group)
            assert info is not None
            assert info.state == "blocked"
            assert [d.id for d in t.dead_letters()] == [letter]
        done = post("delete", id=str(letter), confirm=str(letter))
        assert done.status_code == 303, done.text
        assert done.headers["location"].endswith("done=delete")
        done = post("drop-head", group=group, confirm=group)
        assert done.status_code == 303, done.text
        assert done.headers["location"].endswith("done=drop-head")
    with scene.sync("orders") as t:
        assert t.group(group) is None  # its only message went to the dead letters
        assert [d.group_id for d in t.dead_letters()] == [group]


def test_the_pages_confirmation_fills_in_what_the_server_asks_for(scene: Scene) -> None:
    group = 'a"<b>/7'
    letter = _blocked_and_dead(scene, group)
    app = create_app(transports=[scene.async_("orders")], allow_actions=True)
    with client(app) as c:
        page = c.get(f"/queues/orders/groups/{quote(group, safe='')}").text
        forms = re.findall(r'<form [^>]*actions/([a-z-]+)"[^>]*>', page)
        assert "drop-head" in forms
        (drop,) = re.findall(r'<form [^>]*actions/drop-head"[^>]*>', page)
        assert f'data-confirm-value="{escape(group)}"' in drop
        assert "hx-confirm=" in drop
        for other in re.findall(r'<form [^>]*actions/(?:unblock|pause)"[^>]*>', page):
            assert "data-confirm-value" not in other  # nothing destroyed, nothing to type
        letters = c.get("/queues/orders/dead-letters").text
        (delete,) = re.findall(r'<form [^>]*actions/delete"[^>]*>', letters)
        assert f'data-confirm-value="{letter}"' in delete
        # The script that adds the value once the dialog is accepted is the app's own file.
        assert re.search(r'<script src="/static/dashboard\.js"></script>', page)
        script = c.get("/static/dashboard.js")
        assert script.status_code == 200
        assert "javascript" in script.headers["content-type"]
        assert "htmx:configRequest" in script.text
        assert "data-confirm-value" in script.text
