"""Settings read from the environment (``PGQUE_URL``, ``PGQUE_QUEUE``, ...) or a ``.env`` file."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from pgque.core.validation import OnExhausted

__all__ = ["Settings"]


class Settings(BaseSettings):
    """What ``connect()`` and the ``pgque`` command read when no URL is given.

    Environment variables carry the ``PGQUE_`` prefix: ``PGQUE_URL``, ``PGQUE_QUEUE``,
    ``PGQUE_MAX_ATTEMPTS``, ``PGQUE_ON_EXHAUSTED``. A ``.env`` file in the working directory is
    read too; the environment wins over it.
    """

    model_config = SettingsConfigDict(
        env_prefix="PGQUE_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    url: str = Field(default="memory://", description="the queue URL; its scheme picks the backend")
    queue: str | None = Field(default=None, description="queue name (overrides ?queue=)")
    max_attempts: int | None = Field(default=None, ge=1)
    on_exhausted: OnExhausted | None = None
