"""Where a ``pgque`` command works: the flags over the environment over the settings file,
merged into one :class:`Config` (the queue URL and the options to open it with)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pgque.core.cli._errors import CliError
from pgque.core.errors import ConfigurationError
from pgque.core.models import describe_validation_error
from pgque.core.settings import Settings
from pgque.core.urls import mask_url, parse_url

__all__ = ["Config", "resolve_config"]


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


def resolve_config(
    url: str | None,
    queue: str | None,
    env_file: Path | None,
    *,
    require_url: bool = True,
    fallback: tuple[str | None, str | None] = (None, None),
) -> Config:
    """Merge flags over the environment over the settings file into a :class:`Config`.

    *fallback*: the URL and queue to use when none was given anywhere (a task app's own).
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
    if not url_given and fallback[0] is not None:
        url, url_given = fallback[0], True
        queue = queue if queue is not None or "queue" in settings.model_fields_set else fallback[1]
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
