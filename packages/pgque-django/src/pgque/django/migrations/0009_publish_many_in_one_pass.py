"""Upgrade pgque's schema to version 24: publish_many locks and creates its groups' rows in one
pass (docs/postgres.md). Like 0001, it runs the installer on the queue's database only, and is
not undone."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations
from pgque.django._schema import install

#: The schema version this migration brings.
SCHEMA_VERSION = 24


class Migration(migrations.Migration):  # type: ignore[misc]  # Django ships no type information
    dependencies: ClassVar[list[tuple[str, str]]] = [("pgque", "0008_history_filters_by_index")]
    operations: ClassVar[list[Any]] = [
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
