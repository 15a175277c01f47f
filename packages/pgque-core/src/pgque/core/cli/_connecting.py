"""How a ``pgque`` command opens its transport: the connect behaviour of a one-off command
(or of a worker), whether the server is on this machine."""

from __future__ import annotations

from typing import Any

from pgque.core.cli._config import Config
from pgque.core.cli._flags import current_connect_timeout
from pgque.core.contract import Transport
from pgque.core.registry import backends, connect
from pgque.core.urls import parse_url

__all__ = ["quick_options", "open_transport", "is_local", "LOCAL_HOSTS"]

LOCAL_HOSTS = frozenset({"", "localhost", "127.0.0.1", "::1", "[::1]"})

#: Two names of the connect timeout (PostgreSQL's ``timeout`` came first): a URL giving one
#: keeps the command's value of the other out.
_CONNECT_ALIASES = {"timeout": "connect_timeout", "connect_timeout": "timeout"}


def quick_options(
    url: str, options: dict[str, Any], *, one_shot: bool = True, timeout: float | None = None
) -> dict[str, Any]:
    """Return *options* with the command's connect behaviour, unless the URL sets it.

    The backend of the URL's scheme says which options make it wait up to *timeout*
    (``--connect-timeout``) for a server that answers but is still starting, and make a
    *one_shot* command fail at once when nothing listens (a refused connection), where a
    worker keeps retrying to ride out a restart (:attr:`Backend.command_options
    <pgque.core.Backend>`). Raises ConfigurationError when that backend fails to import.
    """
    parsed = parse_url(url)
    wait = current_connect_timeout() if timeout is None else timeout
    # A URL's connect_timeout (or timeout, PostgreSQL's other name for it) wins over either.
    in_url = set(parsed.options)
    in_url |= {_CONNECT_ALIASES[key] for key in in_url if key in _CONNECT_ALIASES}
    for backend in backends(parsed.scheme):
        if backend.command_options is not None:
            extra = backend.command_options(wait, one_shot)
            return {**{k: v for k, v in extra.items() if k not in in_url}, **options}
    return dict(options)


def open_transport(config: Config, *, one_shot: bool = True, **overrides: Any) -> Transport:
    """Open a blocking transport for *config*; raises PgqueError as ``connect`` does."""
    options = quick_options(config.url, {**config.options, **overrides}, one_shot=one_shot)
    return connect(config.url, **options)


def is_local(config: Config) -> bool:
    """Return True when the queue's server runs on this machine (so its clock is ours)."""
    if config.scheme in {"memory", "unix"}:
        return True
    host = parse_url(config.url).netloc_and_path.split("/", 1)[0].rsplit("@", 1)[-1]
    if host.startswith(("%2F", "%2f")):
        return True  # a percent-encoded Unix socket directory
    host = host.split("]", 1)[0] + "]" if host.startswith("[") else host.split(":", 1)[0]
    query_host = parse_url(config.url).options.get("host", "")
    if query_host.startswith("/"):
        return True
    return host in LOCAL_HOSTS
