"""Install pgque's schema (its tables and functions, schema ``pgque``) in the database that
holds the queue, ``PGQUE["DATABASE"]``; later versions of pgque bring migrations that upgrade
it. Migrating another database does nothing.

Each schema version pgque adds (``shared-sql/migrations/``) comes with a migration of this app
that runs the installer again; the last one's ``SCHEMA_VERSION`` is the version it brings (a
test keeps it equal to pgque.postgres.LATEST_VERSION).

Not undone: ``migrate pgque zero`` leaves the schema and its messages in place (drop it with
``DROP SCHEMA pgque CASCADE`` when you mean it).
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations
from pgque.django._schema import install

#: The schema version this migration brings (a newer pgque installs its own latest).
SCHEMA_VERSION = 16


class Migration(migrations.Migration):  # type: ignore[misc]  # Django ships no type information
    initial = True
    dependencies: ClassVar[list[tuple[str, str]]] = []
    operations: ClassVar[list[Any]] = [
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
