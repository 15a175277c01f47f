"""The dashboard's security: the optional token, the CSRF check of actions, the headers.

- **Token** (optional): every request needs it, as ``Authorization: Bearer T``, as the password
  of HTTP basic auth (any user name), or once as ``?token=T``, which sets an HttpOnly,
  SameSite=Strict cookie holding an HMAC of the token (never the token) and redirects to the
  same address without it.
- **CSRF** (signed double submit): a page sets the cookie ``pgque_csrf`` to a random nonce;
  each action form carries ``HMAC(secret, nonce)``; an action is accepted only when the form's
  value is the HMAC of the cookie it came with. Another site can neither read the page's token
  nor forge one for a cookie it planted, as it lacks the app's secret.
- **Headers** on every answer, errors included: a strict Content-Security-Policy (scripts,
  styles and everything else from the app only; no inline script or style, no framing),
  nosniff, no referrer. :class:`HeadersMiddleware` adds them outside Starlette's own error
  handling, so its 500 answers carry them too.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "TOKEN_COOKIE",
    "HeadersMiddleware",
    "SecurityMiddleware",
    "csrf_token",
    "csrf_valid",
    "new_nonce",
    "same_site_path",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: No inline script or style anywhere; htmx and the stylesheet are files of the app.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]

CSRF_COOKIE = "pgque_csrf"
CSRF_FIELD = "csrf"
TOKEN_COOKIE = "pgque_token"


def new_nonce() -> str:
    """Return a fresh random CSRF cookie value."""
    return secrets.token_urlsafe(32)


def csrf_token(secret: bytes, nonce: str) -> str:
    """Return the form token that goes with the CSRF cookie *nonce*."""
    return hmac.new(secret, b"csrf:" + nonce.encode(), hashlib.sha256).hexdigest()


def csrf_valid(secret: bytes, nonce: str | None, token: str | None) -> bool:
    """Return True when *token* is the form token of cookie *nonce* (constant time).

    Raises nothing, whatever the cookie and the form hold.
    """
    if not nonce or not token:
        return False
    return _same(csrf_token(secret, nonce), token)


def _same(given: str, expected: str) -> bool:
    """Return True when *given* is *expected*, in constant time, for any text *given* holds.

    ``hmac.compare_digest`` raises TypeError on a str with a non-ASCII character: both sides
    are compared as UTF-8 bytes (a lone surrogate too), so a hostile value is just different.
    """
    return hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass")
    )


def same_site_path(location: str, fallback: str) -> str:
    """Return *location* when it is a path of this site (``/x``, ``/x?y=1``), else *fallback*.

    A path of this site starts with one ``/`` and no second ``/`` or ``\\`` (a browser reads
    ``//host`` and ``/\\host`` as another site), has no scheme and no host, and holds only
    printable ASCII without spaces or backslashes (a browser drops tabs and newlines from an
    address, which could make ``//host`` of ``/<TAB>/host``). Raises nothing.
    """
    if not location.startswith("/") or location[1:2] in ("/", "\\"):
        return fallback
    if not all("!" <= char <= "~" and char != "\\" for char in location):
        return fallback
    parts = urlsplit(location)
    if parts.scheme or parts.netloc:
        return fallback
    return location


def _cookie_value(token: str) -> str:
    return hmac.new(token.encode(), b"pgque-dashboard-session", hashlib.sha256).hexdigest()


def _cookies(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        if name == b"cookie":
            for part in value.decode("latin-1").split(";"):
                key, _, val = part.strip().partition("=")
                if key and key not in out:
                    out[key] = val
    return out


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == wanted:
            return str(value.decode("latin-1"))
    return None


class HeadersMiddleware:
    """ASGI middleware: add the security headers to every HTTP answer of *app*.

    The outermost layer of the dashboard (see ``create_app``): outside Starlette's
    ServerErrorMiddleware, whose 500 answers would otherwise go out without them.
    """

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve *scope*, adding the headers to the start of each answer."""
        if scope["type"] not in ("http", "websocket"):
            await self._app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            # A WebSocket refused with an HTTP answer (the ASGI denial response) gets them too.
            if message["type"] in ("http.response.start", "websocket.http.response.start"):
                message["headers"] = [*message.get("headers", []), *_HEADERS]
            await send(message)

        await self._app(scope, receive, send_with_headers)


class SecurityMiddleware:
    """ASGI middleware: with *token*, refuse requests without it (the headers are
    :class:`HeadersMiddleware`'s)."""

    def __init__(self, app: ASGIApp, *, token: str | None) -> None:
        self._app = app
        self._token = token
        self._cookie = None if token is None else _cookie_value(token)

    def _authorised(self, scope: Scope) -> bool:
        assert self._token is not None
        assert self._cookie is not None
        given = _cookies(scope).get(TOKEN_COOKIE)
        if given is not None and _same(given, self._cookie):
            return True
        auth = _header(scope, b"authorization") or ""
        scheme, _, credentials = auth.partition(" ")
        if scheme.lower() == "bearer":
            return _same(credentials.strip(), self._token)
        if scheme.lower() == "basic":
            try:
                # A str with a non-ASCII character raises ValueError, bad base64 binascii.Error
                # (a ValueError), bytes that are not UTF-8 UnicodeDecodeError (a ValueError).
                decoded = base64.b64decode(credentials.strip(), validate=True).decode()
            except ValueError:
                return False
            return _same(decoded.partition(":")[2], self._token)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve *scope*, answering 401 (or the ``?token=`` login redirect) before the app.

        A WebSocket without the token is closed (code 1008) before the app sees it; a scope of
        any other type but ``lifespan`` (one a future server or an outer app might send)
        reaches the app only with the token.
        """
        kind = scope["type"]
        if kind == "lifespan":
            await self._app(scope, receive, send)
            return
        if kind == "websocket":
            if self._token is not None and not self._authorised(scope):
                await _close(receive, send, "a token is required (see the dashboard docs)")
                return
            await self._app(scope, receive, send)
            return
        if kind != "http":
            if self._token is None or self._authorised(scope):
                await self._app(scope, receive, send)
            return
        if self._token is not None and not self._authorised(scope):
            query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), True)
            offered = [value for key, value in query if key == "token"]
            if offered and _same(offered[0], self._token):
                await self._login(scope, query, send)
                return
            await _plain(send, 401, "a token is required (see the dashboard docs)")
            return
        await self._app(scope, receive, send)

    async def _login(self, scope: Scope, query: list[tuple[str, str]], send: Send) -> None:
        assert self._cookie is not None
        rest = urlencode([(k, v) for k, v in query if k != "token"])
        root = scope.get("root_path", "") or ""
        # ASGI's path is the whole (decoded) path, a mount's prefix included.
        location = quote(scope.get("path", "/") or "/")
        if rest:
            location += "?" + rest
        # Only ever back to a path of this site: a path such as //other.host/ would send the
        # visitor (just logged in) to another site.
        location = same_site_path(location, same_site_path(root.rstrip("/") + "/", "/"))
        cookie = f"{TOKEN_COOKIE}={self._cookie}; Path={root or '/'}; HttpOnly; SameSite=Strict"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location.encode("ascii")),
                    (b"set-cookie", cookie.encode()),
                    (b"content-length", b"0"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


#: The WebSocket close code of a refused handshake: policy violation (RFC 6455, 7.4.1).
_WS_POLICY_VIOLATION = 1008


async def _close(receive: Receive, send: Send, reason: str) -> None:
    """Refuse a WebSocket before accepting it (a server answers the handshake with 403)."""
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.close", "code": _WS_POLICY_VIOLATION, "reason": reason})


async def _plain(send: Send, status: int, text: str) -> None:
    body = (text + "\n").encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
    ]
    if status == 401:
        headers.append((b"www-authenticate", b'Basic realm="pgque dashboard", charset="UTF-8"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
