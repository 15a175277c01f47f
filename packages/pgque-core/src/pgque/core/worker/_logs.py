"""The worker's logger and what its records carry: a failure in one short line, and a lease's
identifiers as structured fields (never its event's data)."""

from __future__ import annotations

import logging

from pgque.core.models import Lease
from pgque.core.validation import MAX_REASON_CHARS

__all__ = ["log", "failure_reason", "lease_fields"]

log = logging.getLogger("pgque.worker")


def failure_reason(error: BaseException) -> str:
    """Return a short description of *error* (its class and message) for logs."""
    text = f"{type(error).__name__}: {error}"
    return text[:MAX_REASON_CHARS]


def lease_fields(lease: Lease, **more: object) -> dict[str, object]:
    """Return the structured log fields of *lease*: identifiers only, never the event's data
    (*more* adds fields, each prefixed ``pgque_``)."""
    return {
        "pgque_queue": lease.queue,
        "pgque_group": lease.group_id,
        "pgque_message_id": lease.message_id,
        "pgque_attempt": lease.attempt,
        **{f"pgque_{k}": v for k, v in more.items()},
    }
