"""Pick a backend by URL scheme: ``connect(url)`` and ``connect_async(url)``.

Backends register a :class:`Backend` in the entry-point group ``pgque.transports`` under each
URL scheme they serve. The blocking and asyncio flavours may come from different
distributions (``pgque-postgres`` and ``pgque-postgres-async``) under the same scheme; each
fills in the opener it provides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from pydantic import ValidationError

from pgque.core.contract import AsyncTransport, Transport
from pgque.core.errors import ConfigurationError, InvalidInput, PgqueError
from pgque.core.hints import install_hint
from pgque.core.models import describe_validation_error
from pgque.core.settings import Settings
from pgque.core.url_options import option_value
from pgque.core.urls import mask_url, parse_url

__all__ = [
    "Backend",
    "connect",
    "connect_async",
    "backends",
    "ENTRY_POINT_GROUP",
    "KNOWN_SCHEMES",
]

ENTRY_POINT_GROUP = "pgque.transports"

#: scheme -> (distribution with the blocking transport, distribution with the asyncio one)
KNOWN_SCHEMES: dict[str, tuple[str, str]] = {
    "memory": ("pgque-core", "pgque-core"),
    "postgresql": ("pgque-postgres", "pgque-postgres-async"),
    "postgres": ("pgque-postgres", "pgque-postgres-async"),
    "redis": ("pgque-redis", "pgque-redis"),
    "rediss": ("pgque-redis", "pgque-redis"),
    "unix": ("pgque-redis", "pgque-redis"),
    "redis+cluster": ("pgque-redis", "pgque-redis"),
    "rediss+cluster": ("pgque-redis", "pgque-redis"),
}

_COMMON_INT_OPTIONS = {"max_attempts", "max_event_bytes"}


@dataclass(frozen=True)
class Backend:
    """What a backend registers: how to open a transport from a URL and options.

    ``open(url, **options)`` returns a :class:`Transport`; ``open_async(url, **options)`` an
    :class:`AsyncTransport` (not yet connected; it connects on first use). Either may be
    ``None`` when the distribution provides only the other flavour.

    ``command_options(wait, one_shot)`` returns the options that make a transport opened by a
    one-off command (the ``pgque`` command line) wait up to *wait* seconds for a server that
    answers but is still starting and, with *one_shot*, fail at once when nothing listens (a
    worker keeps retrying instead); ``None``: the backend has no such options.
    """

    package: str
    open: Callable[..., Transport] | None = None
    open_async: Callable[..., AsyncTransport] | None = None
    command_options: Callable[[float, bool], dict[str, Any]] | None = None


def _coerce(options: dict[str, Any]) -> dict[str, Any]:
    """Turn query-string text into typed values for the options every transport accepts."""
    out = dict(options)
    for key in _COMMON_INT_OPTIONS & out.keys():
        out[key] = option_value(key, out[key], "int_or_none")
    return out


def _resolve(url: str | None, options: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    if url is None:
        try:
            settings = Settings()
        except ValidationError as exc:
            problems = describe_validation_error(exc, env_prefix="PGQUE_")
            raise ConfigurationError(f"invalid settings: {problems}") from exc
        url = settings.url
        for key in ("queue", "on_exhausted"):
            value = getattr(settings, key)
            if value is not None:
                options.setdefault(key, value)
        if "max_attempts" in settings.model_fields_set:
            # Only a PGQUE_MAX_ATTEMPTS that was set (``none``: unlimited) overrides the URL.
            options.setdefault("max_attempts", settings.max_attempts)
    parsed = parse_url(url)
    merged: dict[str, Any] = {**parsed.options, **options}
    return url, parsed.scheme, _coerce(merged)


def backends(scheme: str) -> list[Backend]:
    """Return the backends registered for *scheme* (``pgque.transports``), in entry-point order.

    Raises ConfigurationError when one fails to import or is not a :class:`Backend`.
    """
    found: list[Backend] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP, name=scheme):
        try:
            backend = ep.load()
        except ImportError as exc:
            raise ConfigurationError(
                f"the backend for {scheme}:// ({ep.value}) failed to import: {exc}"
            ) from exc
        if not isinstance(backend, Backend):
            raise ConfigurationError(f"entry point {ep.name} = {ep.value} is not a pgque Backend")
        found.append(backend)
    return found


def _missing(scheme: str, url: str, flavour: int) -> ConfigurationError:
    known = KNOWN_SCHEMES.get(scheme)
    if known is None:
        schemes = ", ".join(f"{s}://" for s in KNOWN_SCHEMES)
        return ConfigurationError(
            f"unknown queue URL scheme {scheme!r} in {mask_url(url)}; known schemes: {schemes}"
        )
    kind = "blocking" if flavour == 0 else "asyncio"
    return ConfigurationError(
        f"no {kind} transport for {scheme}:// is installed; run: {install_hint(known[flavour])}"
    )


def _open(opener: Callable[..., Any], url: str, options: dict[str, Any]) -> Any:
    try:
        return opener(url, **options)
    except TypeError as exc:
        raise ConfigurationError(f"invalid option for {mask_url(url)}: {exc}") from exc
    except InvalidInput as exc:
        raise ConfigurationError(str(exc)) from exc
    except PgqueError:
        raise


def connect(url: str | None = None, **options: Any) -> Transport:
    """Open a blocking transport for *url* (default: ``Settings().url``, i.e. ``PGQUE_URL``).

    Query parameters become options (``?queue=orders&max_attempts=5``); keyword *options*
    override them. Raises ConfigurationError for an unknown scheme, a backend that is not
    installed (naming the package to install) or an invalid option.
    """
    url, scheme, merged = _resolve(url, dict(options))
    for backend in backends(scheme):
        if backend.open is not None:
            transport: Transport = _open(backend.open, url, merged)
            return transport
    raise _missing(scheme, url, 0)


def connect_async(url: str | None = None, **options: Any) -> AsyncTransport:
    """Return an asyncio transport for *url*; it connects on first use or ``async with``.

    Same URL rules and errors as :func:`connect`.
    """
    url, scheme, merged = _resolve(url, dict(options))
    for backend in backends(scheme):
        if backend.open_async is not None:
            transport: AsyncTransport = _open(backend.open_async, url, merged)
            return transport
    raise _missing(scheme, url, 1)
