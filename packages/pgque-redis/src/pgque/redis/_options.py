"""The options of a Redis transport: its URL (one server or a cluster's seeds), pgque's own
query options and keywords, their defaults and checks."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from pgque.core.connecting import DEFAULT_CONNECT_TIMEOUT
from pgque.core.errors import ConfigurationError
from pgque.core.history import HistoryRetention
from pgque.core.transport_options import OnExhausted, TransportOptions
from pgque.core.url_options import (
    NOT_GIVEN,
    NotGiven,
    bounded_float,
    bounded_int,
    option_value,
    own_options,
    transport_options,
)
from pgque.core.urls import mask_url

__all__ = [
    "SCHEMES",
    "CLUSTER_SCHEMES",
    "OWN_OPTIONS",
    "DEFAULT_WAIT_TIMEOUT",
    "DEFAULT_RETRIES",
    "DEFAULT_RETRY_BACKOFF",
    "MAX_RETRY_PAUSE",
    "NotGiven",
    "NOT_GIVEN",
    "RedisOptions",
    "resolve_options",
    "cluster_seeds",
    "leftover_options",
]

#: URL schemes of a Redis Cluster: ``redis+cluster://host:port[,host:port...]/`` (seed nodes),
#: ``rediss+cluster://`` with TLS.
CLUSTER_SCHEMES = frozenset({"redis+cluster", "rediss+cluster"})
SCHEMES = frozenset({"redis", "rediss", "unix"}) | CLUSTER_SCHEMES

#: Query options pgque reads and removes before handing the URL to redis-py.
OWN_OPTIONS = frozenset(
    {
        "queue",
        "max_attempts",
        "on_exhausted",
        "retries",
        "retry_backoff",
        "retry_refused",
        "max_event_bytes",
        "wait_replicas",
        "wait_timeout",
        "connect_timeout",
        "history",
    }
)

#: How long a write waits for its replicas by default (``wait_timeout``, seconds).
DEFAULT_WAIT_TIMEOUT = 1.0

DEFAULT_RETRIES = 5
DEFAULT_RETRY_BACKOFF = 0.05
#: The longest single pause between two connection attempts.
MAX_RETRY_PAUSE = 2.0


@dataclass(frozen=True)
class RedisOptions:
    """A Redis transport's options, validated: ``url`` is redis-py's (pgque's own query options
    removed; None for an injected client), ``masked_url`` safe to show."""

    url: str | None
    masked_url: str
    common: TransportOptions
    retries: int
    retry_backoff: float
    retry_refused: bool = True
    #: The seeds of a Redis Cluster URL (``redis+cluster://``) as (host, port); ``url`` is then
    #: a ``redis://`` or ``rediss://`` URL of the first seed. Empty for one server.
    seeds: tuple[tuple[str, int], ...] = ()
    #: Replicas every write must reach before it returns (``WAIT``); 0: no wait.
    wait_replicas: int = 0
    #: How long a write waits for them, in seconds.
    wait_timeout: float = DEFAULT_WAIT_TIMEOUT
    #: How long reaching the server may take, retries included, in seconds.
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT

    @property
    def cluster(self) -> bool:
        """Whether the URL names a Redis Cluster (it has seeds)."""
        return bool(self.seeds)


def _split_url(url: str) -> tuple[str, dict[str, str]]:
    """Return *url* without pgque's options, and those options."""
    if not isinstance(url, str):
        raise ConfigurationError(f"a Redis URL must be a str, not {type(url).__name__}")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigurationError(f"invalid Redis URL {mask_url(url)}: {exc}") from exc
    if parts.scheme.lower() not in SCHEMES:
        raise ConfigurationError(
            "not a Redis URL (redis://, rediss://, unix://, redis+cluster:// or "
            f"rediss+cluster://): {mask_url(url)}"
        )
    return own_options(url, OWN_OPTIONS)


def _number(name: str, given: object, own: Mapping[str, str], default: float) -> Any:
    """Return numeric option *name* (keyword, else the URL's, else *default*) within
    :data:`_BOUNDS`."""
    value = given if given is not None else own.get(name, default)
    low, high = _BOUNDS[name]
    if isinstance(low, int) and isinstance(high, int):
        return bounded_int(name, value, low, high)
    return bounded_float(name, value, low, high)


#: The bounds of the numeric options: an int option has int bounds.
_BOUNDS: dict[str, tuple[int, int] | tuple[float, float]] = {
    "retries": (0, 100),
    "retry_backoff": (0.0, MAX_RETRY_PAUSE),
    "wait_replicas": (0, 100),
    "wait_timeout": (0.001, 60.0),
    "connect_timeout": (0.001, 3600.0),
}


def resolve_options(
    url: str | None,
    *,
    has_client: bool,
    queue: str | None,
    max_attempts: int | NotGiven | None,
    on_exhausted: OnExhausted | None,
    clock: Callable[[], float] | None,
    retries: int | None,
    retry_backoff: float | None,
    max_event_bytes: int | None = None,
    retry_refused: bool | None = None,
    wait_replicas: int | None = None,
    wait_timeout: float | None = None,
    connect_timeout: float | None = None,
    history: HistoryRetention | timedelta | str | None = None,
) -> RedisOptions:
    """Merge keyword options over the URL's query options (keywords win) and validate them
    (:func:`~pgque.core.url_options.transport_options` for the shared ones).

    Raises ConfigurationError for a bad URL or option value, or when neither or both of a URL
    and a client are given; InvalidInput for a bad queue name, max_attempts or on_exhausted.
    """
    if has_client == (url is not None):
        raise ConfigurationError("give a Redis URL or a client (exactly one of them)")
    own: dict[str, str] = {}
    redis_url: str | None = None
    masked = "<injected redis client>"
    seeds: tuple[tuple[str, int], ...] = ()
    if url is not None:
        redis_url, own = _split_url(url)
        masked = mask_url(url)
        if urlsplit(redis_url).scheme.lower() in CLUSTER_SCHEMES:
            redis_url, seeds = cluster_seeds(redis_url)
    common = transport_options(
        own,
        queue=queue,
        max_attempts=max_attempts,
        on_exhausted=on_exhausted,
        clock=clock,
        max_event_bytes=max_event_bytes,
    )
    # The job history's setting to store at open: the keyword's, else the URL's ("7d").
    chosen_history = history if history is not None else own.get("history")
    if chosen_history is not None:
        common = replace(common, history=chosen_history)  # type: ignore[arg-type]  # checked
    refused = retry_refused if retry_refused is not None else own.get("retry_refused", "1")
    return RedisOptions(
        url=redis_url,
        masked_url=masked,
        common=common,
        retries=_number("retries", retries, own, DEFAULT_RETRIES),
        retry_backoff=_number("retry_backoff", retry_backoff, own, DEFAULT_RETRY_BACKOFF),
        retry_refused=bool(option_value("retry_refused", refused, "bool")),
        seeds=seeds,
        # A cluster URL waits for one replica by default: a failover then loses no write
        # that returned.
        wait_replicas=_number("wait_replicas", wait_replicas, own, 1 if seeds else 0),
        wait_timeout=_number("wait_timeout", wait_timeout, own, DEFAULT_WAIT_TIMEOUT),
        connect_timeout=_number("connect_timeout", connect_timeout, own, DEFAULT_CONNECT_TIMEOUT),
    )


def _seed(text: str, url: str) -> tuple[str, int]:
    """Return (host, port) of one seed ``host[:port]`` (``[v6]:port`` too) of *url*."""
    host, port = text, "6379"
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ConfigurationError(f"bad seed node {text!r} in {mask_url(url)}")
        port = rest[1:] or port
    elif ":" in text:
        host, port = text.rsplit(":", 1)
    if not host:
        raise ConfigurationError(f"a seed node without a host in {mask_url(url)}")
    return host, bounded_int("port", port, 1, 65535)


def cluster_seeds(url: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    """Split a ``redis+cluster://[user:password@]host:port[,host:port...][/0][?options]`` URL
    into a ``redis://`` (``rediss://``) URL of its first seed with its credentials and
    options, and every seed as (host, port). Raises ConfigurationError for no seed, a bad
    seed or port, or a database other than 0."""
    parts = urlsplit(url)
    userinfo, _, hosts = parts.netloc.rpartition("@")
    seeds = tuple(_seed(item.strip(), url) for item in hosts.split(",") if item.strip())
    if not seeds:
        raise ConfigurationError(f"a Redis Cluster URL names no seed node: {mask_url(url)}")
    if parts.path.strip("/") not in {"", "0"}:
        raise ConfigurationError(
            f"a Redis Cluster has only database 0, not {parts.path.strip('/')!r}: {mask_url(url)}"
        )
    scheme = "rediss" if parts.scheme.lower() == "rediss+cluster" else "redis"
    host, port = seeds[0]
    shown = f"[{host}]" if ":" in host else host
    first = f"{scheme}://{userinfo + '@' if userinfo else ''}{shown}:{port}/0"
    if parts.query:
        first += f"?{parts.query}"
    return first, seeds


def leftover_options(url: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Return the *options* not in *url*'s query: ``connect()`` hands every query option to
    the opener, and redis-py reads its own (``db``, ...) from the URL."""
    query = {key for key, _ in parse_qsl(urlsplit(url).query, keep_blank_values=True)}
    return {k: v for k, v in options.items() if k not in query}
