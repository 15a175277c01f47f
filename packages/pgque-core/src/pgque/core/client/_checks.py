"""What the front door does without I/O, written once for :class:`~pgque.core.client.Client`
and :class:`~pgque.core.client.AsyncClient`: the options' properties, the injected clock, and
the checks of leases, settlements, fairness keys and publishes (which add the trace context).

The two clients derive from :class:`ClientChecks`; their own modules (the asyncio source and
its generated blocking twin) hold only what calls the driver.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Generic, Protocol, TypeVar

from pgque.core.driver import Publication
from pgque.core.errors import ConfigurationError, InvalidInput
from pgque.core.fairness import check_fairness_key
from pgque.core.models import Capabilities, Event, Lease
from pgque.core.tracing import current_trace_context, with_trace_context
from pgque.core.transport_base import TransportBase
from pgque.core.transport_options import OnExhausted, TransportOptions
from pgque.core.validation import (
    CheckedSettlement,
    check_backend,
    check_delay,
    check_group_id,
    check_items,
    check_lease,
    check_priority,
    check_settlements,
    checked_event,
)

__all__ = ["ClientChecks", "traced_event"]


class _NamedDriver(Protocol):
    """What the checks read of a driver, blocking or asyncio: its name and capabilities."""

    @property
    def backend(self) -> str: ...

    @property
    def capabilities(self) -> Capabilities: ...


D = TypeVar("D", bound=_NamedDriver)


def traced_event(
    event: object, max_bytes: int, context: dict[str, str] | None = None
) -> tuple[Event, str]:
    """Return ``(event, json_text)`` as a publish stores it: *event* with the current trace
    context in its headers (:func:`~pgque.core.tracing.inject_trace_context`), or *event* as
    given when there is none or only the trace headers would take it past *max_bytes*.

    *context*: the trace context's headers (:func:`~pgque.core.tracing.current_trace_context`)
    when the caller read them once for a whole batch; None reads them now. Raises InvalidInput
    as :func:`~pgque.core.validation.checked_event` does for *event*.
    """
    if isinstance(event, Event):
        traced = with_trace_context(event, current_trace_context() if context is None else context)
        if traced is not event:
            try:
                return checked_event(traced, max_bytes)
            except InvalidInput:
                pass  # too large with the trace headers: stored without them (or refused below)
    return checked_event(event, max_bytes)


class ClientChecks(TransportBase, Generic[D]):
    """The part of a front door over a driver of type *D* that does no I/O.

    *options* are the validated options every transport takes (queue, max_attempts,
    on_exhausted, clock, max_event_bytes).
    """

    def __init__(self, driver: D, options: TransportOptions) -> None:
        TransportBase.__init__(self, options)
        self._options = options
        self._driver = driver
        #: ``Lease.origin`` of this store's leases, learnt when the driver opens
        self._origin: str | None = None

    @property
    def capabilities(self) -> Capabilities:
        """What this transport supports: its class's ``CAPABILITIES`` when it sets them (a
        subclass may add an ability of its own), else its driver's."""
        declared = type(self).CAPABILITIES
        return self._driver.capabilities if declared is TransportBase.CAPABILITIES else declared

    @property
    def max_attempts(self) -> int | None:
        """Deliveries a head gets before ``on_exhausted`` applies; None means unlimited."""
        return self._options.max_attempts

    @property
    def on_exhausted(self) -> OnExhausted:
        """What happens to a head that used up ``max_attempts``: dead_letter or block."""
        return self._options.on_exhausted

    def _now(self) -> float | None:
        """The injected clock's time, or None: the store's clock judges."""
        clock = self._options.clock
        return None if clock is None else float(clock())

    def _lease(self, lease: object) -> Lease:
        """Check *lease* is a Lease of this queue and of this backend (no I/O)."""
        return check_backend(check_lease(lease, self.queue, None), self._driver.backend)

    def _settlements(self, settlements: object, now: float | None) -> list[CheckedSettlement]:
        """Check *settlements* (errors timed by the store's clock unless one is injected)."""
        checked = check_settlements(
            settlements,
            self.queue,
            None,
            time.time() if now is None else now,
            store_clock=now is None,
        )
        for item in checked:
            check_backend(item.lease, self._driver.backend)
        return checked

    # -- publishing ---------------------------------------------------------------------

    def _fairness_key(self, key: object) -> str | None:
        """Check a publish's fairness key; a backend without fair shares refuses one."""
        checked = check_fairness_key(key)
        if checked is not None and not self.capabilities.fairness:
            raise ConfigurationError(
                f"{self._driver.backend} does not support fairness keys "
                "(Capabilities.fairness is False; docs/fairness.md lists the backends that do)"
            )
        return checked

    def _publication(self, group_id: object, event: object, key: str | None) -> Publication:
        """Check one message to publish, its event with the trace context (:func:`traced_event`)."""
        checked_group = check_group_id(group_id)
        checked, text = traced_event(event, self._options.max_event_bytes)
        return Publication(checked_group, checked, text, key)

    def _checked_one(
        self, group_id: object, event: object, priority: object, delay: object, key: object
    ) -> tuple[list[Publication], int, float]:
        """Check one publish: the batch of one, the priority and the delay."""
        self._check_open()
        wait = check_delay(delay)
        item = self._publication(group_id, event, self._fairness_key(key))
        return [item], check_priority(priority), wait

    def _checked_batch(
        self, items: object, priority: object, delay: object, key: object
    ) -> tuple[list[Publication], int, float]:
        """Check a publish_many: the batch (each event with the trace context, as
        :func:`traced_event`), the priority and the delay."""
        self._check_open()
        checked_priority = check_priority(priority)
        wait = check_delay(delay)
        checked_key = self._fairness_key(key)
        # The trace context is read once for the batch; without one each event is as given.
        context = current_trace_context()
        event_check = partial(traced_event, context=context) if context else checked_event
        checked = check_items(items, self._options.max_event_bytes, event_check=event_check)
        batch = [Publication(g, event, text, checked_key) for g, event, text in checked]
        return batch, checked_priority, wait
