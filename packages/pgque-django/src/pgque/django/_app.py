"""The task app of a Django project: an :class:`~pgque.core.App` whose worker runs each task
as Django runs a request, as far as connections go."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import close_old_connections
from pgque.core.models import Event, Lease
from pgque.core.tasks import App
from pgque.core.worker import Worker

__all__ = ["DjangoApp", "in_django"]


def in_django(handler: Callable[[Event, Lease], Any]) -> Callable[[Event, Lease], Any]:
    """*handler* closing its thread's Django connections that failed or outlived
    ``CONN_MAX_AGE`` before and after each message, as Django does around a request (with
    the default ``CONN_MAX_AGE = 0``: each task's connection is closed when it ends)."""

    def run(event: Event, lease: Lease) -> Any:
        close_old_connections()
        try:
            return handler(event, lease)
        finally:
            close_old_connections()

    return run


class DjangoApp(App):
    """An :class:`~pgque.core.App` for a Django project (``pgque.django.app`` is one): its
    worker closes each thread's stale Django connections around every task (:func:`in_django`).
    Give it a :class:`~pgque.django.DjangoTransport` for tasks deferred in Django's
    transactions and tasks taking ``connection`` settled in them."""

    def worker(self, **options: Any) -> Worker:
        """A :class:`~pgque.core.Worker` running this app's tasks on its transport, each in
        :func:`in_django` (*options*: the worker's). Raises InvalidInput when a task is
        ``async def`` (the ORM is blocking: tasks of a Django project are plain functions)."""
        if self.__pgque_async__:
            return super().worker(**options)  # which refuses it, naming the AsyncWorker
        return Worker(self.transport, in_django(self), **options)
