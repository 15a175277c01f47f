"""Upgrade pgque's schema to version 21: browse and search (docs/reference.md). Like 0001, it
runs the installer on the queue's database only, and is not undone."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations
from pgque.django._schema import install

#: The schema version this migration brings.
SCHEMA_VERSION = 21


class Migration(migrations.Migration):  # type: ignore[misc]  # Django ships no type information
    dependencies: ClassVar[list[tuple[str, str]]] = [("pgque", "0005_keyed_groups_written_once")]
    operations: ClassVar[list[Any]] = [
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
