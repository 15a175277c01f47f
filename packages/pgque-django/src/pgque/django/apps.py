"""The Django app of pgque: ``INSTALLED_APPS = [..., "pgque.django"]``."""

from __future__ import annotations

from django.apps import AppConfig

__all__ = ["PgqueConfig"]


class PgqueConfig(AppConfig):  # type: ignore[misc]  # Django ships no type information
    """pgque's app: its migration installs the schema, its command runs a worker."""

    name = "pgque.django"
    label = "pgque"
    verbose_name = "pgque"
