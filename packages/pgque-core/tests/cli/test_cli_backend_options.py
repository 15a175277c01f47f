"""A one-off command's connect behaviour comes from the URL's backend
(``Backend.command_options``), not from a list of schemes in the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pgque.core.cli._connecting import quick_options
from pgque.core.registry import Backend, backends

FAKE = """
from pgque.core.registry import Backend


def _options(wait, one_shot):
    return {"wait": wait, "one_shot": one_shot}


FakeBackend = Backend(package="pgque-fake", command_options=_options)
"""


@pytest.fixture
def fake_scheme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Register ``fakeq://`` (a backend with command options only) through a ``.dist-info``."""
    (tmp_path / "pgque_fake_backend.py").write_text(FAKE, encoding="utf-8")
    info = tmp_path / "pgque_fake_backend-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: pgque-fake-backend\nVersion: 0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[pgque.transports]\nfakeq = pgque_fake_backend:FakeBackend\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "fakeq"


def test_the_backend_says_how_a_command_waits(fake_scheme: str) -> None:
    (backend,) = backends(fake_scheme)
    assert isinstance(backend, Backend)
    options: dict[str, Any] = {"queue": "q"}
    assert quick_options("fakeq://host", options, timeout=7.0) == {
        "wait": 7.0,
        "one_shot": True,
        "queue": "q",
    }
    assert quick_options("fakeq://host", {}, one_shot=False, timeout=2.0) == {
        "wait": 2.0,
        "one_shot": False,
    }


def test_the_url_and_the_callers_options_win(fake_scheme: str) -> None:
    got = quick_options("fakeq://host?wait=1", {"one_shot": "mine"}, timeout=7.0)
    assert got == {"one_shot": "mine"}  # ?wait= stays in the URL, the caller's own wins


def test_a_backend_without_command_options_gets_the_options_as_given() -> None:
    assert quick_options("memory://", {"queue": "q"}, timeout=5.0) == {"queue": "q"}
