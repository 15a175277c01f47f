"""The dashboard's security: the Host names served, the optional token, the CSRF check of
actions, the refusal of cross-site writes, the headers.

- **Host** (DNS rebinding): a request whose ``Host`` header names none of the allowed host
  names (with any port) is refused with 400, before anything else; a WebSocket is closed.
  Another site's address that resolves to this machine reaches it with that site's name.
- **Token** (optional): every request needs it, as ``Authorization: Bearer T``, as the password
  of HTTP basic auth (any user name), or once as ``?token=T``, which sets an HttpOnly,
  SameSite=Strict cookie holding an HMAC of the token (never the token) and redirects to the
  same address without it.
- **CSRF** (signed double submit): a page sets the cookie ``pgque_csrf`` to a random nonce;
  each action form carries ``HMAC(secret, nonce)``; an action is accepted only when the form's
  value is the HMAC of the cookie it came with. Another site can neither read the page's token
  nor forge one for a cookie it planted, as it lacks the app's secret.
- **Cross-site writes**: a request that may change something (any method but GET, HEAD,
  OPTIONS and TRACE) and a WebSocket are refused with 403 (closed) when ``Sec-Fetch-Site`` says
  anything but ``same-origin`` or ``none``, or ``Origin`` names another origin than the
  request's ``Host``: whatever CSRF token it carries.
- **Headers** on every answer, errors included: a strict Content-Security-Policy (scripts,
  styles and everything else from the app only; no inline script or style, no framing),
  nosniff, no referrer. :class:`HeadersMiddleware` adds them outside Starlette's own error
  handling, so its 500 answers carry them too.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import re
import secrets
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "DEFAULT_ALLOWED_HOSTS",
    "TOKEN_COOKIE",
    "HeadersMiddleware",
    "SecurityMiddleware",
    "csrf_token",
    "csrf_valid",
    "allowed_host_names",
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

#: The Host names a dashboard serves unless told otherwise: this machine's loopback names.
DEFAULT_ALLOWED_HOSTS = ("127.0.0.1", "localhost", "::1")

#: Methods that only read: every other one may change something, and must come from this site.
_READS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
#: A DNS name or an IPv4 address (lower case); no trailing dot, no port.
_HOST_NAME = re.compile(r"[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?")
_PORT = re.compile(r":[0-9]{1,5}")

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


def _host_name(name: str, *, bare_ipv6: bool) -> str | None:
    """Return *name* in the form hosts are compared in (lower case, an IPv6 address compressed
    and without brackets), or None when it is neither a DNS name nor an IP address."""
    name = name.lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    elif not bare_ipv6 or ":" not in name:
        return name if _HOST_NAME.fullmatch(name) else None
    try:
        return ipaddress.IPv6Address(name).compressed
    except ValueError:
        return None


def allowed_host_names(names: Iterable[str]) -> frozenset[str]:
    """Return the host names of *names* (``localhost``, ``10.0.0.7``, ``::1`` or ``[::1]``) as
    :class:`SecurityMiddleware` compares them; a single str is one name.

    Raises ValueError for an entry that is not a DNS name or an IP address (a port, a scheme,
    a wildcard, an empty name).
    """
    if isinstance(names, str):
        names = [names]
    out = set()
    for name in names:
        normal = _host_name(name.strip(), bare_ipv6=True) if isinstance(name, str) else None
        if normal is None:
            raise ValueError(
                f"{name!r} is not an allowed host name: give a DNS name or an IP address, "
                "without a port, a scheme or a wildcard"
            )
        out.add(normal)
    return frozenset(out)


def _request_host(value: str) -> str | None:
    """Return the host name of a ``Host`` header (its port dropped), or None when the header
    is not ``name``, ``name:port``, ``[ipv6]`` or ``[ipv6]:port``."""
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, port = value[: end + 1], value[end + 1 :]
    else:
        name, colon, rest = value.partition(":")
        port = colon + rest
    if port and not _PORT.fullmatch(port):
        return None
    return _host_name(name, bare_ipv6=False)


def _cross_site(scope: Scope, host: str) -> bool:
    """Return True when the request says another site sent it: ``Sec-Fetch-Site`` other than
    ``same-origin`` or ``none``, or an ``Origin`` that is not ``http(s)://`` + *host* (the
    request's own ``Host`` header). A request without either (a script, curl) is not.

    ``Origin: null`` is another site unless ``Sec-Fetch-Site`` vouches for the request: a
    browser sends ``null`` for a form of this very site posted under its
    ``Referrer-Policy: no-referrer`` (without htmx), with ``Sec-Fetch-Site: same-origin``.
    """
    site = _header(scope, b"sec-fetch-site")
    if site is not None and site.strip().lower() not in ("same-origin", "none"):
        return True
    origin = _header(scope, b"origin")
    if origin is None or (site is not None and origin.strip() == "null"):
        return False
    try:
        parts = urlsplit(origin.strip())
    except ValueError:
        return True
    if parts.scheme not in ("http", "https") or parts.path or parts.query or parts.fragment:
        return True
    return parts.netloc.lower() != host.lower()


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


def _headers(scope: Scope, wanted: bytes) -> list[str]:
    return [value.decode("latin-1") for name, value in scope.get("headers", ()) if name == wanted]


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
    """ASGI middleware: refuse requests for a host not in *allowed_hosts* (see
    :func:`allowed_host_names`), without the *token* when there is one, and cross-site writes
    (the headers are :class:`HeadersMiddleware`'s)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        allowed_hosts: Iterable[str] = DEFAULT_ALLOWED_HOSTS,
    ) -> None:
        self._app = app
        self._token = token
        self._cookie = None if token is None else _cookie_value(token)
        self._hosts = allowed_host_names(allowed_hosts)

    def _host(self, scope: Scope) -> tuple[str | None, str]:
        """Return (the request's Host header, "") when it names an allowed host, else
        (None, why not)."""
        given = _headers(scope, b"host")
        if len(given) != 1:
            return None, f"a request needs one Host header, not {len(given)}"
        name = _request_host(given[0])
        if name is None or name not in self._hosts:
            return None, (
                f"this dashboard does not serve the host {given[0][:100]!r}: name it with "
                "--allowed-host NAME (create_app(allowed_hosts=...))"
            )
        return given[0], ""

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
        """Serve *scope*: answer 400 for a host not allowed, 401 without the token (or the
        ``?token=`` login redirect), 403 for a cross-site write, before the app.

        A WebSocket is closed (code 1008) for any of these before the app sees it; a scope of
        any other type but ``lifespan`` (one a future server or an outer app might send)
        reaches the app only with the token.
        """
        kind = scope["type"]
        if kind == "lifespan":
            await self._app(scope, receive, send)
            return
        if kind not in ("http", "websocket"):
            if self._token is None or self._authorised(scope):
                await self._app(scope, receive, send)
            return
        host, why = self._host(scope)
        if kind == "websocket":
            if host is None:
                await _close(receive, send, why)
            elif self._token is not None and not self._authorised(scope):
                await _close(receive, send, "a token is required (see the dashboard docs)")
            elif _cross_site(scope, host):
                await _close(receive, send, _CROSS_SITE)
            else:
                await self._app(scope, receive, send)
            return
        if host is None:
            await _plain(send, 400, why)
            return
        if self._token is not None and not self._authorised(scope):
            query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), True)
            offered = [value for key, value in query if key == "token"]
            if offered and _same(offered[0], self._token):
                await self._login(scope, query, send)
                return
            await _plain(send, 401, "a token is required (see the dashboard docs)")
            return
        if str(scope.get("method", "")).upper() not in _READS and _cross_site(scope, host):
            await _plain(send, 403, _CROSS_SITE)
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


_CROSS_SITE = (
    "a cross-site request is refused: its Origin or Sec-Fetch-Site says another site sent it "
    "(act from the dashboard's own pages)"
)

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
