"""The tests' model."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models


class Migration(migrations.Migration):  # type: ignore[misc]  # Django ships no type information
    initial = True
    dependencies: ClassVar[list[tuple[str, str]]] = []
    operations: ClassVar[list[Any]] = [
        migrations.CreateModel(
            name="Payment",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("message_id", models.BigIntegerField(null=True, unique=True)),
                ("account", models.CharField(max_length=40)),
                ("cents", models.IntegerField()),
            ],
        ),
    ]
