"""What the tests' tasks and views write through the ORM."""

from __future__ import annotations

from django.db import models


class Payment(models.Model):  # type: ignore[misc]  # Django ships no type information
    """One payment, at most one per message."""

    message_id = models.BigIntegerField(null=True, unique=True)
    account = models.CharField(max_length=40)
    cents = models.IntegerField()
