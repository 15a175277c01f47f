"""Settings from the environment and .env files."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from pgque.core import Settings


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("PGQUE_URL", "PGQUE_QUEUE", "PGQUE_MAX_ATTEMPTS", "PGQUE_ON_EXHAUSTED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def test_defaults() -> None:
    settings = Settings()
    assert settings.url == "memory://"
    assert (settings.queue, settings.max_attempts, settings.on_exhausted) == (None, 10, None)
    assert "max_attempts" not in settings.model_fields_set


@pytest.mark.parametrize("text", ["none", "None", "NONE", " none ", ""])
def test_max_attempts_none_means_unlimited(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("PGQUE_MAX_ATTEMPTS", text)
    settings = Settings()
    assert settings.max_attempts is None
    assert "max_attempts" in settings.model_fields_set


@pytest.mark.parametrize("text", ["0", "-1", "ten", "1.5"])
def test_bad_max_attempts_is_refused(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("PGQUE_MAX_ATTEMPTS", text)
    with pytest.raises(ValidationError):
        Settings()


def test_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGQUE_URL", "postgresql://h/db")
    monkeypatch.setenv("PGQUE_QUEUE", "orders")
    monkeypatch.setenv("PGQUE_MAX_ATTEMPTS", "5")
    monkeypatch.setenv("PGQUE_ON_EXHAUSTED", "block")
    settings = Settings()
    assert settings.url == "postgresql://h/db"
    assert settings.queue == "orders"
    assert settings.max_attempts == 5
    assert settings.on_exhausted == "block"


def test_lower_case_names_work_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("pgque_queue", "lower")
    assert Settings().queue == "lower"


@pytest.mark.parametrize(
    ("name", "value"),
    [("PGQUE_MAX_ATTEMPTS", "0"), ("PGQUE_MAX_ATTEMPTS", "many"), ("PGQUE_ON_EXHAUSTED", "x")],
)
def test_invalid_values(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings()


def test_dotenv_file_and_environment_precedence(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text("PGQUE_URL=redis://from-file\nPGQUE_QUEUE=file_queue\n")
    assert Settings().url == "redis://from-file"
    monkeypatch.setenv("PGQUE_QUEUE", "env_queue")
    settings = Settings()
    assert (settings.url, settings.queue) == ("redis://from-file", "env_queue")


def test_unrelated_variables_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGQUE_SOMETHING_ELSE", "x")
    assert Settings().url == "memory://"


def test_connect_turns_a_bad_setting_into_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pgque.core import ConfigurationError, connect

    monkeypatch.setenv("PGQUE_MAX_ATTEMPTS", "0")
    with pytest.raises(ConfigurationError, match="PGQUE_"):
        connect()
