"""Settings read from the environment (``PGQUE_URL``, ``PGQUE_QUEUE``, ...) or a ``.env`` file."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pgque.core.transport_options import OnExhausted
from pgque.core.url_options import means_none
from pgque.core.validation import DEFAULT_MAX_ATTEMPTS

__all__ = ["Settings"]


class Settings(BaseSettings):
    """What ``connect()`` and the ``pgque`` command read when no URL is given.

    Environment variables carry the ``PGQUE_`` prefix: ``PGQUE_URL``, ``PGQUE_QUEUE``,
    ``PGQUE_MAX_ATTEMPTS``, ``PGQUE_ON_EXHAUSTED``. A ``.env`` file in the working directory is
    read too; the environment wins over it. ``PGQUE_MAX_ATTEMPTS`` defaults to
    :data:`~pgque.core.validation.DEFAULT_MAX_ATTEMPTS` (10); ``none`` means unlimited. Whether
    it was given at all is ``"max_attempts" in settings.model_fields_set`` (a URL's
    ``?max_attempts=`` applies only when it was not).
    """

    model_config = SettingsConfigDict(
        env_prefix="PGQUE_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    url: str = Field(default="memory://", description="the queue URL; its scheme picks the backend")
    queue: str | None = Field(default=None, description="queue name (overrides ?queue=)")
    max_attempts: int | None = Field(
        default=DEFAULT_MAX_ATTEMPTS, ge=1, description="deliveries per head; none: unlimited"
    )
    on_exhausted: OnExhausted | None = None

    @field_validator("max_attempts", mode="before")
    @classmethod
    def _none_means_unlimited(cls, value: object) -> object:
        """Read the text ``none`` (any case, or empty) as None: unlimited, as a URL's
        ``?max_attempts=none`` is read."""
        if isinstance(value, str) and means_none(value):
            return None
        return value
