"""What the dashboard's browser tests share: the served dashboard, screenshots, page reads."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import Page

from pgque.core import Transport, connect

_ROOT = Path(__file__).resolve().parents[4]

#: Where the screenshots go: PGQUE_SCREENSHOTS_DIR (`nox -s docs-images` points it at
#: docs/images, which docs/dashboard.md shows), else build/screenshots, which git ignores, so a
#: test run never changes a tracked file.
IMAGES = Path(os.environ.get("PGQUE_SCREENSHOTS_DIR") or _ROOT / "build" / "screenshots")


@dataclass
class Served:
    """A dashboard served on *base* for the queues of *url*; *queue* is this test's own."""

    base: str
    url: str
    queue: str
    backend: str

    def transport(self, **options: object) -> Transport:
        """A blocking transport on this test's queue."""
        return connect(self.url, queue=self.queue, **options)


def shoot(page: Page, served: Served, name: str) -> None:
    """Save a screenshot of *page* as IMAGES/dashboard-NAME.png (PostgreSQL runs only)."""
    if served.backend != "postgres":
        return
    IMAGES.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(IMAGES / f"dashboard-{name}.png"), full_page=True)
