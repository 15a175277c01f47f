"""Split a ``postgresql://`` queue URL into the DSN for psycopg and the transport's options."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from pgque.core.errors import ConfigurationError
from pgque.core.url_options import OptionKind, option_value

__all__ = ["TRANSPORT_OPTIONS", "split_url", "command_options"]

#: Query options the transport consumes; every other query parameter is left to libpq
#: (``sslmode``, ``application_name``, ``host`` for a socket directory, ...).
#: ``connect_timeout`` is libpq's name too: pgque takes it (seconds, a float, for the whole
#: opening, retries included) and gives libpq what is left of it at each attempt.
TRANSPORT_OPTIONS = frozenset(
    {
        "queue",
        "max_attempts",
        "on_exhausted",
        "setup",
        "min_size",
        "max_size",
        "timeout",
        "connect_timeout",
        "retry_refused",
        "max_event_bytes",
        "prepared_statements",
        "listen_url",
        "history",
    }
)
#: How the typed options read as query text (the rest are text or not from the URL).
_KINDS: dict[str, OptionKind] = {
    "setup": "bool",
    "retry_refused": "bool",
    "prepared_statements": "bool",
    "min_size": "int",
    "max_size": "int",
    "max_event_bytes": "int",
    "timeout": "float",
    "connect_timeout": "float",
}


def _coerce(key: str, value: Any) -> Any:
    kind = _KINDS.get(key)
    return value if kind is None else option_value(key, value, kind)


def split_url(url: str, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Return (DSN without pgque's options, transport keyword arguments) of what ``connect()``
    collected, *options* (the URL's query merged with keywords); libpq's parameters stay in
    the DSN. Raises ConfigurationError for an unknown option or an invalid value.
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    in_url = {key for key, _ in query}
    kept = [(key, value) for key, value in query if key not in TRANSPORT_OPTIONS]
    # libpq decodes %XX but not "+": spaces (options=-c a=b) must stay %20.
    query_text = urlencode(kept, quote_via=quote)
    dsn = urlunsplit((parts.scheme, parts.netloc, parts.path, query_text, parts.fragment))
    kwargs: dict[str, Any] = {}
    for key, value in options.items():
        if key in TRANSPORT_OPTIONS or key == "clock":
            kwargs[key] = _coerce(key, value)
        elif key not in in_url:
            raise ConfigurationError(f"unknown option {key!r} for a postgresql:// queue URL")
    # timeout and connect_timeout name one option: a keyword of either wins over the URL's.
    both = {"timeout", "connect_timeout"} & kwargs.keys()
    if len(both) == 2 and len(both & in_url) == 1:
        del kwargs[(both & in_url).pop()]
    return dsn, kwargs


def command_options(wait: float, one_shot: bool) -> dict[str, Any]:
    """``Backend.command_options``: give up connecting after *wait* seconds and, when
    *one_shot*, at once on a refused connection."""
    options: dict[str, Any] = {"timeout": wait}
    if one_shot:
        options["retry_refused"] = False
    return options
