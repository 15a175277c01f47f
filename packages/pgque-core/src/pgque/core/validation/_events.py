"""Checks of what is published: an event as the JSON text a store keeps, its size limit, and
a ``publish_many`` batch."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pgque.core.errors import InvalidInput
from pgque.core.models import Event
from pgque.core.validation._ids import check_group_id
from pgque.core.validation._limits import DEFAULT_MAX_EVENT_BYTES, MAX_BATCH, MAX_EVENT_BYTES_LIMIT

__all__ = [
    "check_event",
    "checked_event",
    "check_max_event_bytes",
    "check_items",
]


def check_event(event: object, max_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> str:
    """Return the JSON text of *event*; refuse anything that is not a JSON-able Event.

    The text is *event*'s as given (the front door adds the trace context to a publish's
    headers before it checks the event). Raises InvalidInput when *event* is not an Event, its
    data is not JSON, or its JSON text is longer than *max_bytes* UTF-8 bytes.
    """
    return checked_event(event, max_bytes)[1]


def checked_event(event: object, max_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> tuple[Event, str]:
    """Return ``(event, json_text)`` as stored: :func:`check_event`, with the Event itself."""
    if not isinstance(event, Event):
        raise InvalidInput(f"event must be a pgque.core.Event, not {type(event).__name__}")
    text = event.to_json()
    # Stores take UTF-8: a lone surrogate (in kind, id or headers) must fail here, typed,
    # not as a raw UnicodeEncodeError from the driver.
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"event {event.id!r} is not valid Unicode (lone surrogate)") from exc
    if size > max_bytes:
        raise InvalidInput(
            f"event {event.id!r} is {size} bytes as JSON; "
            f"the limit is {max_bytes} (max_event_bytes)"
        )
    return event, text


def check_max_event_bytes(value: object) -> int:
    """Return *value* if it is an int from 1 to ``MAX_EVENT_BYTES_LIMIT``; else InvalidInput."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"max_event_bytes must be an int, not {value!r}")
    if not 1 <= value <= MAX_EVENT_BYTES_LIMIT:
        raise InvalidInput(
            f"max_event_bytes must be from 1 to {MAX_EVENT_BYTES_LIMIT}, not {value}"
        )
    return value


def check_items(
    items: object,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    *,
    event_check: Callable[[object, int], tuple[Event, str]] = checked_event,
) -> list[tuple[str, Event, str]]:
    """Validate a publish_many batch; return (group_id, event, event_json) triples.

    Each event is checked by *event_check* (by default :func:`checked_event`; the front door
    passes its own, which adds the trace context). Raises InvalidInput for a malformed item, a
    bad group id or event (see :func:`check_event`) or a batch of more than 10,000 items.
    """
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise InvalidInput("items must be an iterable of (group_id, Event) pairs")
    out: list[tuple[str, Event, str]] = []
    # A batch names few groups many times: each distinct str id is checked once. An Event
    # object given several times (one event fanned out to many groups) is checked and written
    # once: the entry keeps the object itself, so its id() cannot be reused meanwhile.
    seen: set[str] = set()
    written: dict[int, tuple[object, tuple[Event, str]]] = {}
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            raise InvalidInput(f"each item must be a (group_id, Event) pair, not {item!r}")
        group_id, event = item
        if type(group_id) is not str or group_id not in seen:
            group_id = check_group_id(group_id)
            seen.add(group_id)
        entry = written.get(id(event))
        if entry is None or entry[0] is not event:
            entry = (event, event_check(event, max_event_bytes))
            written[id(event)] = entry
        checked, text = entry[1]
        out.append((group_id, checked, text))
    if len(out) > MAX_BATCH:
        raise InvalidInput(f"a batch holds at most {MAX_BATCH} items, not {len(out)}")
    return out
