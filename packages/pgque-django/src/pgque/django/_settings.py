"""``settings.PGQUE``: where the queue is and what the worker runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from pgque.core.errors import ConfigurationError

__all__ = ["PgqueSettings", "read_settings"]

#: The keys ``settings.PGQUE`` may have.
KEYS = frozenset({"DATABASE", "QUEUE", "OPTIONS", "TASKS"})


@dataclass(frozen=True)
class PgqueSettings:
    """``settings.PGQUE``, checked, with its defaults."""

    #: the alias in ``settings.DATABASES`` of the database that holds the queue
    database: str = "default"
    #: the queue's name (several queues share one database)
    queue: str = "default"
    #: options of the transport (``max_attempts``, ``on_exhausted``, ``max_size``, ...)
    options: dict[str, Any] = field(default_factory=dict)
    #: the modules the worker imports to register tasks; None: ``tasks`` of every installed app
    tasks: tuple[str, ...] | None = None


def read_settings() -> PgqueSettings:
    """Return ``settings.PGQUE`` (every key optional). Raises ConfigurationError for an
    unknown key or a value of the wrong type."""
    given: Any = getattr(settings, "PGQUE", {})
    if not isinstance(given, dict):
        raise ConfigurationError(f"settings.PGQUE must be a dict, not {type(given).__name__}")
    unknown = sorted(set(given) - KEYS)
    if unknown:
        raise ConfigurationError(
            f"settings.PGQUE has unknown keys {unknown}: the keys are {sorted(KEYS)}"
        )
    database = given.get("DATABASE", "default")
    queue = given.get("QUEUE", "default")
    options = given.get("OPTIONS", {})
    tasks = given.get("TASKS")
    for name, value in (("DATABASE", database), ("QUEUE", queue)):
        if not isinstance(value, str) or not value:
            raise ConfigurationError(f"PGQUE[{name!r}] must be a non-empty str, not {value!r}")
    if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
        raise ConfigurationError(f"PGQUE['OPTIONS'] must be a dict of options, not {options!r}")
    if "queue" in options or ("setup" in options and options["setup"] is not False):
        raise ConfigurationError(
            "PGQUE['OPTIONS'] takes neither queue (PGQUE['QUEUE'] says it) nor setup=True "
            "(the migration installs the schema)"
        )
    if tasks is not None:
        if isinstance(tasks, str) or not all(isinstance(t, str) for t in tasks):
            raise ConfigurationError(f"PGQUE['TASKS'] must be a list of modules, not {tasks!r}")
        tasks = tuple(tasks)
    return PgqueSettings(database=database, queue=queue, options=dict(options), tasks=tasks)
