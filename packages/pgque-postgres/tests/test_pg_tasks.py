"""Tasks on PostgreSQL: a dedup key goes through the queue's dedup window in the database."""

from __future__ import annotations

from collections.abc import Callable

from pgque.core import App
from pgque.postgres import PostgresTransport

Make = Callable[..., PostgresTransport]


def test_a_dedup_key_publishes_a_repeat_once_across_apps(transport_factory: Make) -> None:
    # Two apps (two producers) on one queue share the window: it is in the database.
    first_app = App(transport_factory())
    second_app = App(transport_factory(queue=first_app.transport.queue))
    ids = []
    for app in (first_app, second_app):

        @app.task(group="report-{month}", kind="monthly_report")
        def monthly_report(month: str) -> None: ...

        ids.append(monthly_report.defer(month="2026-11", dedup_key="report-2026-11"))
        ids.append(monthly_report.defer(month="2026-12", dedup_key="report-2026-12"))
    assert ids[0] == ids[2]
    assert ids[1] == ids[3]
    assert ids[0] != ids[1]
    assert first_app.transport.stats().messages == 2
