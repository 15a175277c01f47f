"""The options every transport takes (:class:`TransportOptions`), validated once at
construction, and what happens to a head whose attempts ran out (:data:`OnExhausted`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

from pgque.core.errors import InvalidInput
from pgque.core.history import HistorySetting, check_history_option
from pgque.core.models import Event
from pgque.core.validation import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_EVENT_BYTES,
    check_event,
    check_items,
    check_max_event_bytes,
    check_queue_name,
)

__all__ = ["OnExhausted", "TransportOptions"]

OnExhausted = Literal["dead_letter", "block"]


@dataclass(frozen=True)
class TransportOptions:
    """The options every transport accepts, validated once at construction.

    ``max_attempts`` defaults to :data:`~pgque.core.validation.DEFAULT_MAX_ATTEMPTS`; ``None``
    means unlimited. ``clock`` returns epoch seconds and exists for deterministic tests only;
    production leases are judged by the server's clock. ``max_event_bytes`` caps one event's
    JSON text (UTF-8 bytes); a larger publish is refused with InvalidInput before any I/O.
    Raises InvalidInput for an invalid option.
    """

    queue: str = "default"
    max_attempts: int | None = DEFAULT_MAX_ATTEMPTS
    on_exhausted: OnExhausted = "dead_letter"
    clock: Callable[[], float] | None = None
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    #: The queue's job history to store when the transport opens: a retention, ``"off"``,
    #: or None to leave the stored setting as it is (docs/history.md). Given as text
    #: (``"7d"``, ``"7d,1000000"``) or a timedelta, it is checked into a setting.
    history: HistorySetting | None = None

    def __post_init__(self) -> None:
        check_queue_name(self.queue)
        object.__setattr__(self, "history", check_history_option(self.history))
        check_max_event_bytes(self.max_event_bytes)
        if self.max_attempts is not None and (
            isinstance(self.max_attempts, bool)
            or not isinstance(self.max_attempts, int)
            or self.max_attempts < 1
        ):
            raise InvalidInput(
                f"max_attempts must be None or an int >= 1, not {self.max_attempts!r}"
            )
        if self.on_exhausted not in get_args(OnExhausted):
            raise InvalidInput(
                f"on_exhausted must be 'dead_letter' or 'block', not {self.on_exhausted!r}"
            )
        if self.clock is not None and not callable(self.clock):
            raise InvalidInput("clock must be a callable returning epoch seconds")

    def event(self, event: object) -> str:
        """Return *event*'s JSON text within this transport's size limit
        (:func:`~pgque.core.validation.check_event`)."""
        return check_event(event, self.max_event_bytes)

    def items(self, items: object) -> list[tuple[str, Event, str]]:
        """Validate a publish_many batch within this transport's size limit
        (:func:`~pgque.core.validation.check_items`)."""
        return check_items(items, self.max_event_bytes)
