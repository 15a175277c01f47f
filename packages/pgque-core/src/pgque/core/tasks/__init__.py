"""Tasks: plain functions deferred to a worker with checked arguments (docs/tasks.md).

::

    from pgque.core import App

    app = App("postgresql://localhost/shop", queue="orders")

    @app.task(group="order-{order_id}")
    def charge(order_id: int, amount_cents: int) -> None: ...

    charge.defer(order_id=7, amount_cents=1250)   # checked here, then published
    app.worker(concurrency=8).run()                # or: pgque worker shop.tasks:app
"""

from __future__ import annotations

from pgque.core.tasks._app_async import AsyncApp
from pgque.core.tasks._app_sync import App
from pgque.core.tasks._spec import GroupRule, KeyRule, TaskSpec
from pgque.core.tasks._task import Task

__all__ = ["App", "AsyncApp", "GroupRule", "KeyRule", "Task", "TaskSpec"]
