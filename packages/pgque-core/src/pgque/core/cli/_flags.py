"""The flags every ``pgque`` command takes: ``--url``, ``--queue``, ``--env-file`` and
``--connect-timeout`` (kept in the click context, where :func:`current_connect_timeout` reads
it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

__all__ = [
    "common_options",
    "connect_timeout_option",
    "current_connect_timeout",
    "CONNECT_TIMEOUT_S",
]

F = TypeVar("F", bound=Callable[..., Any])

#: How long a command tries to reach its server (``--connect-timeout``), a server that answers
#: but is still starting waited for until then; ``?connect_timeout=`` in the URL (or
#: PostgreSQL's ``?timeout=``) still wins.
CONNECT_TIMEOUT_S = 10.0

_CONNECT_TIMEOUT_KEY = "pgque.connect_timeout"


def _keep_connect_timeout(ctx: click.Context, _param: click.Parameter, value: float) -> float:
    ctx.meta[_CONNECT_TIMEOUT_KEY] = value
    return value


def connect_timeout_option(func: F) -> F:
    """Add ``--connect-timeout`` (kept in the click context for :func:`open_transport`)."""
    return click.option(
        "--connect-timeout",
        type=click.FloatRange(0, 3600),
        default=CONNECT_TIMEOUT_S,
        show_default=True,
        metavar="SECONDS",
        expose_value=False,
        callback=_keep_connect_timeout,
        help="Give up reaching the server after this long, retries included: a server still "
        "starting is waited for until then, a refused connection fails at once "
        "(?connect_timeout= in the URL wins).",
    )(func)


def common_options(func: F) -> F:
    """Add ``--url``, ``--queue``, ``--env-file`` and ``--connect-timeout`` to a command."""
    func = connect_timeout_option(func)
    func = click.option(
        "--env-file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Read PGQUE_* settings from this file instead of ./.env.",
    )(func)
    func = click.option(
        "--queue",
        "-q",
        default=None,
        metavar="NAME",
        help="Queue name [env PGQUE_QUEUE; default: ?queue= in the URL, else 'default'].",
    )(func)
    func = click.option(
        "--url",
        "-u",
        default=None,
        metavar="URL",
        help="Queue URL: postgresql://..., redis://..., memory:// [env PGQUE_URL].",
    )(func)
    return func


def current_connect_timeout() -> float:
    """Return ``--connect-timeout`` of the running command (the default outside one)."""
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if _CONNECT_TIMEOUT_KEY in ctx.meta:
            return float(ctx.meta[_CONNECT_TIMEOUT_KEY])
        ctx = ctx.parent
    return CONNECT_TIMEOUT_S
