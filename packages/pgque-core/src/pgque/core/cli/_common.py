"""What every ``pgque`` command shares: configuration, opening a transport, one-line errors."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import ValidationError

from pgque.core.contract import Transport
from pgque.core.errors import ConfigurationError, RetryableConflict
from pgque.core.explain import never_used
from pgque.core.models import describe_validation_error
from pgque.core.registry import backends, connect
from pgque.core.settings import Settings
from pgque.core.urls import mask_url, parse_url
from pgque.core.worker import Backoff

__all__ = [
    "CliError",
    "Config",
    "common_options",
    "resolve_config",
    "open_transport",
    "one_line",
    "quick_options",
    "is_local",
    "LOCAL_HOSTS",
    "retrying",
    "CONFLICT_ATTEMPTS",
    "refuse_never_used",
    "never_used_sentence",
    "MISSING_PACKAGE_EXIT",
]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

LOCAL_HOSTS = frozenset({"", "localhost", "127.0.0.1", "::1", "[::1]"})

#: The exit status of a command (or an option) whose distribution is not installed: a usage
#: error, as for a command that does not exist.
MISSING_PACKAGE_EXIT = 2


class CliError(Exception):
    """A command failed in a way the user can act on; ``main`` prints it on one line."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Config:
    """Where a command works: the queue URL and the transport options to open it with."""

    url: str
    options: dict[str, Any] = field(default_factory=dict)
    url_given: bool = True

    @property
    def masked_url(self) -> str:
        """The URL with any password replaced by ``***``."""
        masked = mask_url(self.url)
        if "://" in self.url and "://" not in masked:
            # urlunsplit drops the "//" of a URL without a host: keep memory:// recognisable.
            masked = masked.replace(":", "://", 1)
        return masked

    @property
    def scheme(self) -> str:
        """The URL scheme, lower case (``postgresql``, ``redis``, ``memory``)."""
        return parse_url(self.url).scheme

    @property
    def queue(self) -> str:
        """The queue name: ``--queue``/``PGQUE_QUEUE``, else ``?queue=``, else ``default``."""
        queue = self.options.get("queue") or parse_url(self.url).options.get("queue")
        return str(queue) if queue else "default"


_WHITESPACE = re.compile(r"\s+")


def one_line(text: str) -> str:
    """Collapse *text* onto one line (driver messages often span several)."""
    return _WHITESPACE.sub(" ", text).strip()


def _keep_connect_timeout(ctx: click.Context, _param: click.Parameter, value: float) -> float:
    ctx.meta[_CONNECT_TIMEOUT_KEY] = value
    return value


_CONNECT_TIMEOUT_KEY = "pgque.connect_timeout"


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


def resolve_config(
    url: str | None,
    queue: str | None,
    env_file: Path | None,
    *,
    require_url: bool = True,
) -> Config:
    """Merge flags over the environment over the settings file into a :class:`Config`.

    Raises CliError when the settings are invalid, the settings file is missing, or
    *require_url* and no URL was given anywhere (a private ``memory://`` queue would be empty
    and vanish with the process, which is never what an operator meant).
    """
    try:
        if env_file is not None:
            if not env_file.is_file():
                raise CliError(f"settings file not found: {env_file}")
            settings = Settings(_env_file=os.fspath(env_file))  # type: ignore[call-arg]
        else:
            settings = Settings()
    except ValidationError as exc:
        problems = describe_validation_error(exc, env_prefix="PGQUE_")
        raise CliError(f"invalid settings: {problems}") from exc
    url_given = url is not None or "url" in settings.model_fields_set
    if require_url and not url_given:
        raise CliError("no queue URL: pass --url URL or set PGQUE_URL (e.g. postgresql://...)")
    final_url = url if url is not None else settings.url
    try:
        parse_url(final_url)
    except ConfigurationError as exc:
        raise CliError(str(exc)) from exc
    options: dict[str, Any] = {}
    chosen_queue = queue if queue is not None else settings.queue
    if chosen_queue is not None:
        options["queue"] = chosen_queue
    if "max_attempts" in settings.model_fields_set:
        # As connect() reads it: only a PGQUE_MAX_ATTEMPTS that was set (``none``: unlimited)
        # beats the URL's ?max_attempts=; unset, the transport's default (10) applies.
        options["max_attempts"] = settings.max_attempts
    if settings.on_exhausted is not None:
        options["on_exhausted"] = settings.on_exhausted
    return Config(url=final_url, options=options, url_given=url_given)


#: How long a command tries to reach its server (``--connect-timeout``), a server that answers
#: but is still starting waited for until then; ``?connect_timeout=`` in the URL (or
#: PostgreSQL's ``?timeout=``) still wins.
CONNECT_TIMEOUT_S = 10.0


#: Two names of the connect timeout (PostgreSQL's ``timeout`` came first): a URL giving one
#: keeps the command's value of the other out.
_CONNECT_ALIASES = {"timeout": "connect_timeout", "connect_timeout": "timeout"}


def current_connect_timeout() -> float:
    """Return ``--connect-timeout`` of the running command (the default outside one)."""
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if _CONNECT_TIMEOUT_KEY in ctx.meta:
            return float(ctx.meta[_CONNECT_TIMEOUT_KEY])
        ctx = ctx.parent
    return CONNECT_TIMEOUT_S


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


#: How many times a command makes a call that keeps conflicting with concurrent work.
CONFLICT_ATTEMPTS = 5
#: The first and the longest pause between two of those attempts, in seconds (jittered).
CONFLICT_BACKOFF = (0.05, 1.0)
#: Each pause is drawn from half to all of its step (see :class:`~pgque.core.worker.Backoff`).
CONFLICT_JITTER = 0.5


def retrying(call: Callable[[], T], what: str) -> T:
    """Return ``call()``, running it again after a RetryableConflict, with a doubling pause.

    A conflict (deadlock, serialization failure) was rolled back whole, so running the call
    again is safe. Raises CliError (one line) after CONFLICT_ATTEMPTS conflicts in a row, and
    whatever else *call* raises.
    """
    # Jittered, so that two commands that collided do not collide again in step.
    backoff = Backoff(*CONFLICT_BACKOFF, jitter=CONFLICT_JITTER)
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            return call()
        except RetryableConflict as exc:
            if attempt == CONFLICT_ATTEMPTS:
                raise CliError(
                    f"{what} conflicted with concurrent work {CONFLICT_ATTEMPTS} times (each "
                    f"attempt was rolled back; nothing changed); try again: {exc}"
                ) from exc
        time.sleep(backoff.next())
    raise AssertionError("unreachable")  # pragma: no cover


#: What a "never used" sentence adds for a memory:// URL: every command has a store of its own.
MEMORY_NOTE = " (a memory:// queue lives only in the process that opened it)"


def never_used_sentence(transport: Transport, config: Config) -> str | None:
    """Return the sentence of :func:`~pgque.core.explain.never_used` for *transport*'s queue
    (with a note on memory:// URLs), or None when the queue has been used or the transport
    cannot list its queues. Raises what the transport raises."""
    sentence = retrying(lambda: never_used(transport, where=config.masked_url), "stats")
    if sentence is not None and config.scheme == "memory":
        sentence += MEMORY_NOTE
    return sentence


def refuse_never_used(transport: Transport, config: Config) -> None:
    """Raise CliError (exit 1) when *transport*'s queue has never been used.

    A read command calls it when it found nothing, so that a typo'd queue name is not taken
    for an empty queue: the line names the queues there.
    """
    sentence = never_used_sentence(transport, config)
    if sentence is not None:
        raise CliError(sentence)
