"""What pgque.django's migrations run: install or upgrade pgque's schema on the database that
holds the queue (``PGQUE["DATABASE"]``), nothing on another."""

from __future__ import annotations

from typing import Any

from pgque.django._connection import psycopg_of
from pgque.django._settings import read_settings
from pgque.postgres import install_schema

__all__ = ["install"]


def install(apps: Any, schema_editor: Any) -> None:
    """Install or upgrade the schema on the migrated connection, if it holds the queue."""
    wrapper = schema_editor.connection
    if wrapper.alias != read_settings().database:
        return
    install_schema(psycopg_of(wrapper))
