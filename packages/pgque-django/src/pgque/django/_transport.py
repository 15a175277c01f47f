"""The PostgreSQL transport on a Django database: publishing on Django's connection, settling
in Django's transaction."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from django.db import transaction
from pgque.core.models import Event, Lease
from pgque.django._connection import dsn_of, is_django_connection, psycopg_of
from pgque.postgres import PostgresTransport

__all__ = ["DjangoTransport"]


class DjangoTransport(PostgresTransport):
    """A pgque queue in a Django database (``DATABASES[database]``, PostgreSQL on psycopg 3).

    Claims, acks and the other calls of a worker go through the transport's own pool of
    connections to that database. Publishing goes through **Django's connection** of the
    calling thread, so a publish (or a task's ``defer``) inside ``transaction.atomic()``
    commits or rolls back with the block, and one outside it commits at once, as Django's
    own writes do. :meth:`settle_in` without a connection runs in ``transaction.atomic()``
    on Django's connection: the ORM's writes in the block and the ack commit together.
    Where a connection is accepted, a Django connection (``django.db.connection``,
    ``connections[alias]``) is too, as is a psycopg or SQLAlchemy one.

    The schema is installed by the migration of ``pgque.django`` (``manage.py migrate``):
    *options* default ``setup`` to False, so a database not migrated raises SchemaMismatch.
    Other *options* are those of :class:`~pgque.postgres.PostgresTransport`. Raises
    ConfigurationError for an unknown alias or a database that is not PostgreSQL.
    """

    def __init__(self, *, database: str = "default", queue: str = "default", **options: Any):
        self.database = database
        options.setdefault("setup", False)
        super().__init__(dsn_of(database), queue=queue, **options)

    def _joined(self, connection: Any) -> Any:
        """The connection a publish runs on: Django's when none is given."""
        if connection is None:
            return psycopg_of(self.database)
        if is_django_connection(connection):
            return psycopg_of(connection)
        return connection

    def publish(
        self,
        group_id: str,
        event: Event,
        *,
        priority: int = 0,
        delay: float = 0.0,
        fairness_key: str | None = None,
        connection: Any = None,
    ) -> int:
        """Append *event* to *group_id*'s tail on Django's connection (or *connection*), in
        its transaction when one is open; return the message id. As
        :meth:`PostgresTransport.publish`."""
        return super().publish(
            group_id,
            event,
            priority=priority,
            delay=delay,
            fairness_key=fairness_key,
            connection=self._joined(connection),
        )

    def publish_many(
        self,
        items: Iterable[tuple[str, Event]],
        *,
        priority: int = 0,
        delay: float = 0.0,
        fairness_key: str | None = None,
        connection: Any = None,
    ) -> list[int]:
        """Append many (group_id, event) pairs atomically on Django's connection (or
        *connection*), as :meth:`publish`; return their ids."""
        return super().publish_many(
            items,
            priority=priority,
            delay=delay,
            fairness_key=fairness_key,
            connection=self._joined(connection),
        )

    def settle_in(self, lease: Lease, connection: Any = None) -> Any:
        """Settle *lease* in a transaction with the block's writes, as
        :meth:`PostgresTransport.settle_in`. Without *connection* (or with a Django
        connection) the block runs in ``transaction.atomic()`` on Django's connection of the
        calling thread: the ORM's writes in it and the settlement commit together, an
        exception rolls both back. Raises LeaseLost on entry for a lease no longer the
        group's."""
        if connection is None:
            return self._in_atomic(lease, self.database)
        if is_django_connection(connection):
            return self._in_atomic(lease, connection.alias)
        return super().settle_in(lease, connection)

    @contextmanager
    def _in_atomic(self, lease: Lease, alias: str) -> Iterator[Any]:
        # Django's atomic() first, so that Django knows a transaction is open (the ORM then
        # writes in it instead of switching autocommit, and on_commit hooks wait for it); the
        # settlement's transaction on the same psycopg connection is that one, or a savepoint
        # inside it when the caller's block had already begun.
        with transaction.atomic(using=alias):
            block: AbstractContextManager[Any] = super().settle_in(lease, psycopg_of(alias))
            with block as tx:
                yield tx
