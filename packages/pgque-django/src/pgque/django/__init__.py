"""pgque.django — pgque in a Django project (docs/django.md).

::

    # settings.py
    INSTALLED_APPS = [..., "pgque.django"]
    PGQUE = {"QUEUE": "shop"}           # the queue lives in DATABASES["default"]

    # shop/tasks.py
    from pgque.django import app

    @app.task(group="order-{order_id}")
    def ship(order_id: int) -> None: ...

    # a view
    with transaction.atomic():
        order = Order.objects.create(...)
        ship.defer(order_id=order.pk)   # published if and only if the block commits

``manage.py migrate`` installs the schema, ``manage.py pgque_worker`` runs the tasks. A task
taking a ``connection`` parameter runs in ``transaction.atomic()``: its ORM writes and the ack
commit together.
"""

from __future__ import annotations

import threading
from typing import Any

from pgque.django._app import DjangoApp, in_django
from pgque.django._connection import psycopg_of
from pgque.django._settings import PgqueSettings, read_settings
from pgque.django._transport import DjangoTransport

__all__ = [
    "DjangoApp",
    "DjangoTransport",
    "PgqueSettings",
    "app",
    "close",
    "get_app",
    "get_transport",
    "in_django",
    "psycopg_of",
    "read_settings",
]

__version__ = "0.1.0"

_lock = threading.Lock()
_app: DjangoApp | None = None


def get_app() -> DjangoApp:
    """Return the project's task app: a :class:`DjangoApp` on :func:`get_transport`,
    made on first use (``pgque.django.app`` is the same object). Raises ConfigurationError
    for bad settings."""
    global _app
    with _lock:
        if _app is None:
            _app = DjangoApp(_new_transport(read_settings()))
        return _app


def get_transport() -> DjangoTransport:
    """Return the project's transport, made from ``settings.PGQUE`` on first use (it connects
    on first call). Raises ConfigurationError for bad settings."""
    transport = get_app().transport
    assert isinstance(transport, DjangoTransport)
    return transport


def close() -> None:
    """Close the project's transport (its pool of connections) if it was made: at the end of
    a process that used it (``pgque_worker`` does). The app keeps its tasks; the transport
    cannot be used again."""
    with _lock:
        made = _app
    if made is not None:
        made.transport.close()


def _new_transport(config: PgqueSettings) -> DjangoTransport:
    return DjangoTransport(database=config.database, queue=config.queue, **config.options)


def __getattr__(name: str) -> Any:
    # ``from pgque.django import app``: made when first asked for, once settings are loaded.
    if name == "app":
        return get_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
