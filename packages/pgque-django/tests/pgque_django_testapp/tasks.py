"""Tasks on the project's app, found by ``manage.py pgque_worker`` (autodiscovery)."""

from __future__ import annotations

from typing import Any

from pgque.core.models import Lease
from pgque.django import app
from pgque_django_testapp.models import Payment


@app.task(group="account-{account}")  # type: ignore[untyped-decorator]
def pay(account: str, cents: int, lease: Lease, connection: Any) -> None:
    """Record a payment; the row and the ack commit together."""
    Payment.objects.create(message_id=lease.message_id, account=account, cents=cents)
