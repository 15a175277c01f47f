"""How a command reads ``PGQUE_MAX_ATTEMPTS``: like ``connect()``, only when it was set (``none``
meaning unlimited), so the default of 10 never overrides a URL's ``?max_attempts=``."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgque.core.cli._config import resolve_config
from pgque.core.cli._connecting import open_transport


@pytest.fixture(autouse=True)
def _no_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("PGQUE_URL", "PGQUE_QUEUE", "PGQUE_MAX_ATTEMPTS", "PGQUE_ON_EXHAUSTED"):
        monkeypatch.delenv(name, raising=False)


def _max_attempts(url: str) -> int | None:
    with open_transport(resolve_config(url, None, None)) as transport:
        return transport.max_attempts


def test_the_url_option_applies_when_the_setting_is_unset() -> None:
    assert _max_attempts("memory://?max_attempts=1") == 1
    assert _max_attempts("memory://") == 10


@pytest.mark.parametrize(("text", "expected"), [("3", 3), ("none", None), ("None", None)])
def test_a_set_setting_wins_and_none_is_unlimited(
    monkeypatch: pytest.MonkeyPatch, text: str, expected: int | None
) -> None:
    monkeypatch.setenv("PGQUE_MAX_ATTEMPTS", text)
    assert _max_attempts("memory://?max_attempts=1") == expected
