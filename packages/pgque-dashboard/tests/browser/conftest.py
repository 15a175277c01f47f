"""Fixtures of the dashboard's browser tests: a served dashboard and headless Chromium.

The dashboard runs under uvicorn in a thread of this process, on a free port of 127.0.0.1,
reading PostgreSQL or Redis through a URL as ``pgque dashboard`` does. The browser is the
system's Chromium (Debian's ``chromium``, or PGQUE_TEST_CHROMIUM_BIN) driven by Playwright;
Playwright's own browser downloads are never used. Without a Chromium the tests skip, unless
PGQUE_TEST_REQUIRE_CHROMIUM=1 (``nox -s dashboard``), where they fail saying what to install.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import uvicorn
from _browser_helpers import Served
from playwright.sync_api import Browser, Page, sync_playwright

from pgque.core import SupportsPurge, connect
from pgque.dashboard import create_app


def _chromium() -> str:
    named = os.environ.get("PGQUE_TEST_CHROMIUM_BIN")
    if named:
        return named
    for candidate in (shutil.which("chromium"), "/usr/bin/chromium"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    message = "chromium is not installed: run `sudo apt-get install chromium`"
    if os.environ.get("PGQUE_TEST_REQUIRE_CHROMIUM") == "1":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """A headless Chromium for the whole run."""
    path = _chromium()
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=path, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        yield chromium
        chromium.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(params=["postgres", "redis"])
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    """The dashboard, actions enabled, over PostgreSQL or Redis, on a free local port."""
    backend = str(request.param)
    url = str(request.getfixturevalue("postgres_url" if backend == "postgres" else "redis_url"))
    queue = f"dash-{uuid.uuid4().hex[:10]}"
    app = create_app(url, allow_actions=True, refresh=0.5, sample_interval=0.5)
    port = _free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive(), "the dashboard's server stopped during start-up"
        assert time.monotonic() < deadline, "the dashboard's server did not start in 20 s"
        time.sleep(0.02)
    try:
        yield Served(f"http://127.0.0.1:{port}", url, queue, backend)
    finally:
        server.should_exit = True
        thread.join(20)
        with connect(url, queue=queue) as transport:
            if isinstance(transport, SupportsPurge):
                transport.purge()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page (its own cookies) that accepts every confirmation and records dialogs,
    console messages and page errors on ``page.evidence``."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    tab = context.new_page()
    evidence: list[str] = []

    def on_dialog(dialog: object) -> None:
        kind = getattr(dialog, "type", "?")
        evidence.append(f"dialog {kind}: {getattr(dialog, 'message', '')}")
        dialog.accept()  # type: ignore[attr-defined]

    tab.on("dialog", on_dialog)
    tab.on(
        "console",
        lambda message: evidence.append(
            f"console {message.type}: {message.text} at {message.location.get('url')}"
        ),
    )
    tab.on("pageerror", lambda error: evidence.append(f"pageerror: {error}"))
    tab.evidence = evidence  # type: ignore[attr-defined]
    yield tab
    context.close()
