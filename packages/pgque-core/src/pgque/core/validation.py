"""Input checks shared by every transport, so bad input is refused before any I/O.

Each check raises :class:`~pgque.core.errors.InvalidInput` and returns the value in its
canonical form. Transports call these first; a refused call changes nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, get_args

from pgque.core.errors import InvalidInput
from pgque.core.history import HistorySetting, check_history_option
from pgque.core.models import (
    GROUP_STATES,
    ErrorInfo,
    Event,
    GroupStateName,
    Lease,
    Settlement,
    SettleOutcome,
)
from pgque.core.tracing import inject_trace_context

__all__ = [
    "check_backend",
    "check_store",
    "MAX_GROUP_ID_BYTES",
    "MAX_REASON_CHARS",
    "MAX_PRIORITY",
    "MAX_VISIBILITY_S",
    "DEFAULT_MAX_EVENT_BYTES",
    "MAX_EVENT_BYTES_LIMIT",
    "OnExhausted",
    "TransportOptions",
    "check_text_id",
    "check_group_id",
    "check_priority",
    "check_seconds",
    "check_delay",
    "check_entry_name",
    "check_tick",
    "check_message_id",
    "check_head",
    "check_scheduled_page",
    "MAX_ENTRY_NAME_BYTES",
    "check_batch_size",
    "check_claim_count",
    "check_holders",
    "check_settlements",
    "CheckedSettlement",
    "check_event",
    "checked_event",
    "check_max_event_bytes",
    "check_items",
    "check_lease",
    "check_queue_name",
    "QUEUE_NAME_PATTERN",
    "check_reason",
    "check_limit",
    "check_ids",
    "MAX_HOLDER_CHARS",
    "MAX_GROUPS_PAGE",
    "DEFAULT_MAX_ATTEMPTS",
    "check_holder",
    "check_group_state",
    "check_groups_page",
    "check_oldest_groups",
    "check_after_id",
    "check_error",
    "exhausted_reason",
]

MAX_GROUP_ID_BYTES = 512
#: The longest schedule entry name (UTF-8 bytes), see ``publish_tick``.
MAX_ENTRY_NAME_BYTES = 200
MAX_REASON_CHARS = 2000
MAX_PRIORITY = 4
#: A lease or delay longer than a year is a bug, not a wish; refusing it keeps float maths sane.
MAX_VISIBILITY_S = 366 * 24 * 3600.0
MAX_BATCH = 10_000
#: The longest ``holder`` label of a claim, in characters.
MAX_HOLDER_CHARS = 200
#: The largest page of ``groups()``.
MAX_GROUPS_PAGE = 1000
#: ``max_attempts`` when none is given: a poison head is retried this often, then
#: dead-lettered (``on_exhausted="dead_letter"``), so it cannot hold its group forever.
#: ``max_attempts=None`` means unlimited.
DEFAULT_MAX_ATTEMPTS = 10
#: The default cap on one event's JSON text, in UTF-8 bytes. Large enough for any sane message
#: (and the conformance suite's 1 MiB round trip), small enough that one hostile publish cannot
#: fill a worker's memory or a Redis reply buffer.
DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024
#: The highest ``max_event_bytes`` a transport accepts (PostgreSQL text stops at 1 GiB, Redis
#: strings at 512 MiB).
MAX_EVENT_BYTES_LIMIT = 256 * 1024 * 1024

OnExhausted = Literal["dead_letter", "block"]

#: The queue name grammar: what users name queues (``orders-v2``, ``Billing.EU``), nothing that
#: needs quoting in a Redis key or hash tag (no ``{``, ``}``, ``:``, space) and nothing a shell
#: or a URL query would mangle. Names reach SQL only as parameters, never as identifiers.
QUEUE_NAME_PATTERN = r"[A-Za-z][A-Za-z0-9_.\-]{0,63}"
_QUEUE_NAME = re.compile(QUEUE_NAME_PATTERN)


def check_queue_name(name: object) -> str:
    """Return *name* if it is a valid queue name: ``[A-Za-z][A-Za-z0-9_.-]{0,63}``.

    Raises InvalidInput for anything else (before any I/O).
    """
    if not isinstance(name, str) or not _QUEUE_NAME.fullmatch(name):
        raise InvalidInput(
            f"invalid queue name {name!r}: use 1-64 characters of letters, digits, "
            "_, - and ., starting with a letter"
        )
    return name


def check_text_id(
    value: object, name: str, max_bytes: int, *, empty_ok: bool = False, expected: str = "a str"
) -> str:
    """Return *value* if it is a str usable as an identifier: a group id, a key, a dedup key.

    It must be valid Unicode (no lone surrogates) without NUL, of at most *max_bytes* UTF-8
    bytes, and not empty unless *empty_ok*. *name* and *expected* word the error. Raises
    InvalidInput otherwise.
    """
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be {expected}, not {type(value).__name__}")
    if not value and not empty_ok:
        raise InvalidInput(f"{name} must not be empty")
    if "\x00" in value:
        raise InvalidInput(f"{name} must not contain NUL")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{name} must be valid Unicode (no lone surrogates)") from exc
    if size > max_bytes:
        raise InvalidInput(f"{name} is {size} bytes; the limit is {max_bytes}")
    return value


def check_group_id(group_id: object) -> str:
    """Return *group_id* if it is a str of at most 512 UTF-8 bytes without NUL, not blank.

    Blank means empty or white space alone (``" "``, a tab, U+3000): such an id reads as no
    group at all in every listing. Raises InvalidInput otherwise.
    """
    checked = check_text_id(group_id, "group_id", MAX_GROUP_ID_BYTES)
    if not checked.strip():
        raise InvalidInput(f"group_id must not be blank (white space alone), not {checked!r}")
    return checked


def check_priority(priority: object, name: str = "priority") -> int:
    """Return *priority* if it is an int from 0 to 4 (bool is refused)."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidInput(f"{name} must be an int from 0 to 4, not {priority!r}")
    if not 0 <= priority <= MAX_PRIORITY:
        raise InvalidInput(f"{name} must be from 0 to 4, not {priority}")
    return priority


def check_seconds(value: object, name: str) -> float:
    """Return *value* as float if it is a finite number from 0 to one year."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{name} must be a number of seconds, not {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidInput(f"{name} must be finite and >= 0, not {value!r}")
    if seconds > MAX_VISIBILITY_S:
        raise InvalidInput(f"{name} must be at most one year, not {value!r}")
    return seconds


def check_delay(value: object) -> float:
    """Return a publish's *delay* as float: a finite number of seconds from 0 to one year."""
    return check_seconds(value, "delay")


def check_entry_name(entry: object) -> str:
    """Return a schedule entry's name: a non-empty str of at most 200 UTF-8 bytes, no NUL."""
    return check_text_id(entry, "entry", MAX_ENTRY_NAME_BYTES)


def check_tick(tick: object) -> float:
    """Return a schedule tick (epoch seconds) as float: finite and >= 0."""
    if isinstance(tick, bool) or not isinstance(tick, (int, float)):
        raise InvalidInput(f"tick must be epoch seconds (a number), not {tick!r}")
    value = float(tick)
    if not math.isfinite(value) or value < 0:
        raise InvalidInput(f"tick must be finite and >= 0, not {tick!r}")
    return value


def check_message_id(message_id: object) -> int:
    """Return *message_id* if it is a positive int (``cancel``); bool is refused."""
    if isinstance(message_id, bool) or not isinstance(message_id, int) or message_id < 1:
        raise InvalidInput(f"message_id must be a positive int, not {message_id!r}")
    return message_id


def check_head(head: object) -> int | None:
    """Return *head* (``unblock(head=)``): None, or the positive int id of a message."""
    if head is None:
        return None
    if isinstance(head, bool) or not isinstance(head, int) or head < 1:
        raise InvalidInput(f"head must be a message id (a positive int) or None, not {head!r}")
    return head


def check_scheduled_page(limit: object, after: object) -> tuple[int, int | None]:
    """Check the arguments of ``scheduled()``: a limit from 1 to 1,000 (as ``groups()``'s
    page) and None or a message id (an int) to list after."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_GROUPS_PAGE:
        raise InvalidInput(f"limit must be an int from 1 to {MAX_GROUPS_PAGE}, not {limit!r}")
    return limit, check_after_id(after)


def check_batch_size(n: object) -> int:
    """Return *n* if it is an int from 1 to 10,000."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidInput(f"n must be an int, not {n!r}")
    if not 1 <= n <= MAX_BATCH:
        raise InvalidInput(f"n must be from 1 to {MAX_BATCH}, not {n}")
    return n


def check_claim_count(n: object) -> int:
    """Return *n* if it is an int from 0 to 10,000 (``settle_and_claim``: 0 settles only)."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidInput(f"n must be an int, not {n!r}")
    if not 0 <= n <= MAX_BATCH:
        raise InvalidInput(f"n must be from 0 to {MAX_BATCH}, not {n}")
    return n


def check_limit(limit: object) -> int:
    """Return *limit* if it is an int from 1 to 10,000."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_BATCH:
        raise InvalidInput(f"limit must be an int from 1 to {MAX_BATCH}, not {limit!r}")
    return limit


def check_ids(ids: object) -> list[int] | None:
    """Return *ids* as a list of ints, or None for "all"."""
    if ids is None:
        return None
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise InvalidInput("ids must be a sequence of ints or None")
    out: list[int] = []
    for item in ids:
        if isinstance(item, bool) or not isinstance(item, int):
            raise InvalidInput(f"ids must be ints, not {item!r}")
        out.append(item)
    return out


def check_event(event: object, max_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> str:
    """Return the JSON text of *event*; refuse anything that is not a JSON-able Event.

    The text carries the current trace context in its headers when OpenTelemetry is in use
    (:func:`pgque.core.tracing.inject_trace_context`; an event that would exceed *max_bytes*
    only with it is stored without it). Raises InvalidInput when *event* is not an Event, its
    data is not JSON, or its JSON text is longer than *max_bytes* UTF-8 bytes.
    """
    return checked_event(event, max_bytes)[1]


def checked_event(event: object, max_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> tuple[Event, str]:
    """Return ``(event, json_text)`` as stored: :func:`check_event`, with the Event it wrote."""
    if not isinstance(event, Event):
        raise InvalidInput(f"event must be a pgque.core.Event, not {type(event).__name__}")
    traced = inject_trace_context(event)
    if traced is not event:
        text = traced.to_json()
        if _utf8_size(traced, text) <= max_bytes:
            return traced, text
    return event, _event_text(event, max_bytes)


def _utf8_size(event: Event, text: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"event {event.id!r} is not valid Unicode (lone surrogate)") from exc


def _event_text(event: Event, max_bytes: int) -> str:
    text = event.to_json()
    # Stores take UTF-8: a lone surrogate (in kind, id or headers) must fail here, typed,
    # not as a raw UnicodeEncodeError from the driver.
    size = _utf8_size(event, text)
    if size > max_bytes:
        raise InvalidInput(
            f"event {event.id!r} is {size} bytes as JSON; "
            f"the limit is {max_bytes} (max_event_bytes)"
        )
    return text


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
    items: object, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
) -> list[tuple[str, Event, str]]:
    """Validate a publish_many batch; return (group_id, event, event_json) triples.

    Raises InvalidInput for a malformed item, a bad group id or event (see :func:`check_event`)
    or a batch of more than 10,000 items.
    """
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise InvalidInput("items must be an iterable of (group_id, Event) pairs")
    out: list[tuple[str, Event, str]] = []
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            raise InvalidInput(f"each item must be a (group_id, Event) pair, not {item!r}")
        group_id, event = item
        group_id = check_group_id(group_id)
        out.append((group_id, *checked_event(event, max_event_bytes)))
    if len(out) > MAX_BATCH:
        raise InvalidInput(f"a batch holds at most {MAX_BATCH} items, not {len(out)}")
    return out


def check_reason(reason: object) -> str:
    """Return *reason* if it is a str of at most 2,000 characters without NUL."""
    if not isinstance(reason, str):
        raise InvalidInput(f"reason must be a str, not {type(reason).__name__}")
    if "\x00" in reason or len(reason) > MAX_REASON_CHARS:
        raise InvalidInput(f"reason must be at most {MAX_REASON_CHARS} characters, without NUL")
    try:
        reason.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput("reason must be valid Unicode (no lone surrogates)") from exc
    return reason


def check_holder(holder: object) -> str | None:
    """Return *holder* if it is None or a str of at most 200 characters without NUL."""
    if holder is None:
        return None
    if not isinstance(holder, str):
        raise InvalidInput(f"holder must be a str or None, not {type(holder).__name__}")
    if len(holder) > MAX_HOLDER_CHARS:
        raise InvalidInput(f"holder must be at most {MAX_HOLDER_CHARS} characters")
    return check_text_id(holder, "holder", 4 * MAX_HOLDER_CHARS, empty_ok=True) or None


def check_holders(holder: object, n: int) -> list[str | None]:
    """Return one checked holder per lease of a claim of *n*: *holder* repeated when it is a
    str or None, else *holder* itself, a list or tuple of exactly *n* holders."""
    if holder is None or isinstance(holder, str):
        return [check_holder(holder)] * n
    if not isinstance(holder, (list, tuple)):
        raise InvalidInput(
            f"holder must be a str, None or a list of one per lease, not {type(holder).__name__}"
        )
    if len(holder) != n:
        raise InvalidInput(
            f"a list of holders needs one per lease asked for ({n}), not {len(holder)}"
        )
    return [check_holder(item) for item in holder]


def check_group_state(state: object) -> GroupStateName | None:
    """Return *state* if it is None or one of ``ready leased parked blocked paused``."""
    if state is None:
        return None
    for name in GROUP_STATES:
        if state == name:
            return name
    raise InvalidInput(f"state must be one of {', '.join(GROUP_STATES)} or None, not {state!r}")


def check_groups_page(
    state: object, limit: object, after: object
) -> tuple[GroupStateName | None, int, str | None]:
    """Check the arguments of ``groups()``: a state or None, a limit from 1 to 1,000, and
    a group id or None to start after."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_GROUPS_PAGE:
        raise InvalidInput(f"limit must be an int from 1 to {MAX_GROUPS_PAGE}, not {limit!r}")
    start = None if after is None else check_text_id(after, "after", MAX_GROUP_ID_BYTES)
    return check_group_state(state), limit, start


def check_oldest_groups(state: object, limit: object) -> tuple[GroupStateName | None, int]:
    """Check the arguments of ``oldest_groups()``: a state or None, a limit from 1 to 1,000."""
    chosen, size, _ = check_groups_page(state, limit, None)
    return chosen, size


def check_after_id(after: object) -> int | None:
    """Return *after* if it is None or an int (a dead letter id to list after)."""
    if after is None:
        return None
    if isinstance(after, bool) or not isinstance(after, int):
        raise InvalidInput(f"after must be an int or None, not {after!r}")
    return after


def check_error(error: object, at: float) -> ErrorInfo | None:
    """Return the bounded ErrorInfo for *error* (an exception, a str, an ErrorInfo or None).

    An ErrorInfo given whole is bounded again (its own ``at`` is kept). Raises InvalidInput
    for anything else.
    """
    if error is None:
        return None
    if isinstance(error, ErrorInfo):
        return error.bounded()
    if isinstance(error, (BaseException, str)):
        return ErrorInfo.capture(error, at)
    raise InvalidInput(
        f"error must be an exception, a str, an ErrorInfo or None, not {type(error).__name__}"
    )


def exhausted_reason(max_attempts: int) -> str:
    """The dead-letter reason when *max_attempts* ran out: ``max_attempts (N) exhausted``."""
    return f"max_attempts ({max_attempts}) exhausted"


def check_lease(lease: object, queue: str, origin: str | None) -> Lease:
    """Return *lease* if it was issued by this queue and this store (*origin*; None: the
    store is checked apart, once the transport knows which it is)."""
    if not isinstance(lease, Lease):
        raise InvalidInput(f"expected a Lease, not {type(lease).__name__}")
    if lease.queue != queue:
        raise InvalidInput(
            f"this lease belongs to queue {lease.queue!r} of another transport, "
            f"not to queue {queue!r} here"
        )
    if origin is not None:
        check_store(lease, origin)
    return lease


def check_store(lease: Lease, origin: str) -> Lease:
    """Return *lease* (already checked by :func:`check_lease`) if it was issued by the store
    whose leases carry *origin*."""
    if lease.origin != origin:
        raise InvalidInput(
            f"this lease belongs to another transport: it was issued by another store "
            f"({lease.origin or 'unknown'}), not by this one ({origin}), though for a queue "
            f"of the same name {lease.queue!r}"
        )
    return lease


@dataclass(frozen=True, slots=True)
class CheckedSettlement:
    """A :class:`Settlement` whose fields were checked: what a backend applies."""

    lease: Lease
    outcome: SettleOutcome
    delay: float
    reason: str
    error: ErrorInfo | None
    #: True when *error*'s ``at`` is only the client's stand-in and the store's clock is to
    #: fill it in (no injected clock, and the error was not given as a whole ErrorInfo)
    store_clock: bool = False


_OUTCOMES: frozenset[str] = frozenset(("ack", "nack", "release", "dead_letter"))


def check_backend(lease: Lease, backend: str) -> Lease:
    """Return *lease* if its origin names *backend* (``backend:<store>``): a lease of another
    backend is refused without I/O, before the transport has learnt which store it is."""
    if not lease.origin.startswith(backend + ":"):
        raise InvalidInput(
            f"this lease belongs to another transport: it was issued by another backend "
            f"({lease.origin or 'unknown'}), not by {backend}"
        )
    return lease


def check_settlements(
    settlements: object,
    queue: str,
    origin: str | None,
    at: float,
    *,
    store_clock: bool = False,
) -> list[CheckedSettlement]:
    """Return *settlements* checked, in order (errors captured at *at*, epoch seconds; with
    *store_clock*, marked for the store's clock to time them: ``CheckedSettlement.store_clock``).

    Raises InvalidInput for something that is not a sequence of Settlement, more than 10,000
    of them, a lease of another queue or store, an unknown outcome, or a bad delay, reason or
    error; *delay* is only allowed on a nack, *reason* and *error* only where they apply.
    """
    if isinstance(settlements, (str, bytes)) or not isinstance(settlements, (list, tuple)):
        raise InvalidInput(
            f"settlements must be a list of Settlement, not {type(settlements).__name__}"
        )
    if len(settlements) > MAX_BATCH:
        raise InvalidInput(f"at most {MAX_BATCH} settlements per call, not {len(settlements)}")
    out: list[CheckedSettlement] = []
    for item in settlements:
        if not isinstance(item, Settlement):
            raise InvalidInput(f"expected a Settlement, not {type(item).__name__}")
        lease = check_lease(item.lease, queue, origin)
        outcome = item.outcome
        if outcome not in _OUTCOMES:
            raise InvalidInput(
                f"a settlement's outcome is ack, nack, release or dead_letter, not {outcome!r}"
            )
        delay = check_seconds(item.delay, "delay")
        if delay and outcome != "nack":
            raise InvalidInput(f"only a nack takes a delay (this settlement is {outcome})")
        reason = check_reason(item.reason)
        if reason and outcome != "dead_letter":
            raise InvalidInput(f"only a dead_letter takes a reason (this settlement is {outcome})")
        error = check_error(item.error, at)
        if error is not None and outcome not in ("nack", "dead_letter"):
            raise InvalidInput(
                f"only a nack or a dead_letter records an error (this settlement is {outcome})"
            )
        timed_by_store = store_clock and error is not None and not isinstance(item.error, ErrorInfo)
        out.append(CheckedSettlement(lease, outcome, delay, reason, error, timed_by_store))
    return out


@dataclass(frozen=True)
class TransportOptions:
    """The options every transport accepts, validated once at construction.

    ``max_attempts`` defaults to :data:`DEFAULT_MAX_ATTEMPTS`; ``None`` means unlimited.
    ``clock`` returns epoch seconds and exists for deterministic tests only; production leases
    are judged by the server's clock. ``max_event_bytes`` caps one event's JSON text (UTF-8
    bytes); a larger publish is refused with InvalidInput before any I/O.
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
        """Return *event*'s JSON text within this transport's size limit (:func:`check_event`)."""
        return check_event(event, self.max_event_bytes)

    def items(self, items: object) -> list[tuple[str, Event, str]]:
        """Validate a publish_many batch within this transport's size limit."""
        return check_items(items, self.max_event_bytes)
