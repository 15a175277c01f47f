"""Live workers, the pure part: a heartbeat's content and checks, and when a worker counts as
alive.

No I/O. A transport with ``Capabilities.workers`` keeps one row per worker of a queue
(docs/workers.md): a worker registers with its first heartbeat, heartbeats on the store's clock
every ``heartbeat_every`` seconds with what each busy slot holds, and says goodbye on a clean
stop (its row goes). ``workers()`` lists the rows with the leases the store still holds in each
worker's name (the groups whose ``lease_holder`` starts with the worker's ``holder`` prefix), so
a worker gone without a goodbye shows which groups it still holds and when they expire. The
rows of workers whose last heartbeat is older than :data:`PRUNE_AFTER_S` are removed by the
next heartbeat of any worker of the store.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pgque.core.errors import InvalidInput
from pgque.core.models import WorkerInfo, WorkerLease, WorkerSlot
from pgque.core.validation import MAX_GROUP_ID_BYTES, MAX_HOLDER_CHARS, check_text_id

__all__ = [
    "ALIVE_MULTIPLE",
    "DEFAULT_HEARTBEAT_S",
    "MAX_HEARTBEAT_S",
    "MIN_HEARTBEAT_S",
    "PRUNE_AFTER_S",
    "SlotBeat",
    "WorkerBeat",
    "check_heartbeat_every",
    "check_worker_beat",
    "check_worker_id",
    "decode_slots",
    "encode_slots",
    "holds",
    "is_alive",
    "worker_info",
    "worker_infos_of_rows",
]

#: How often a worker heartbeats by default (the worker option ``heartbeat_every``), seconds.
DEFAULT_HEARTBEAT_S = 10.0
#: The shortest and longest heartbeat interval a worker may choose, seconds.
MIN_HEARTBEAT_S = 0.1
MAX_HEARTBEAT_S = 600.0
#: A worker is alive while its last heartbeat is at most this many of its intervals old: one
#: late or lost heartbeat (a slow round trip, a busy machine) does not mark it missing.
ALIVE_MULTIPLE = 3.0
#: The row of a worker whose last heartbeat is older than this (one hour) is removed.
PRUNE_AFTER_S = 3600.0
#: The longest worker id (its name), a host name and a version, in characters.
MAX_WORKER_ID_CHARS = MAX_HOLDER_CHARS
_MAX_VERSION_CHARS = 64
#: The most busy slots one heartbeat reports (a worker's largest concurrency).
MAX_SLOTS = 10_000


@dataclass(frozen=True, slots=True)
class SlotBeat:
    """One busy slot in a heartbeat: its index, the message it runs and for how long it has
    run it (seconds, by the worker's monotonic clock; the store turns it into ``since`` on its
    own clock)."""

    slot: int
    group_id: str
    message_id: int
    held_for: float


@dataclass(frozen=True, slots=True)
class WorkerBeat:
    """What a worker tells the store with each heartbeat: who it is (*id*: its name; *holder*:
    the ``host:pid`` prefix of its claims' holder labels), where it runs, how many slots it has,
    how often it heartbeats, and what each busy slot holds."""

    id: str
    holder: str
    host: str
    pid: int
    version: str
    concurrency: int
    heartbeat_every: float
    slots: tuple[SlotBeat, ...] = ()


def check_worker_id(value: object) -> str:
    """Return *value* if it is a usable worker id (a non-empty str of at most 200 characters
    without NUL). Raises InvalidInput otherwise."""
    text = check_text_id(value, "worker", 4 * MAX_WORKER_ID_CHARS)
    if len(text) > MAX_WORKER_ID_CHARS:
        raise InvalidInput(f"worker must be at most {MAX_WORKER_ID_CHARS} characters")
    return text


def check_heartbeat_every(value: object) -> float:
    """Return *value* as seconds if it is a heartbeat interval from 0.1 to 600 seconds.
    Raises InvalidInput otherwise."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not MIN_HEARTBEAT_S <= value <= MAX_HEARTBEAT_S
    ):
        raise InvalidInput(
            f"heartbeat_every must be from {MIN_HEARTBEAT_S:g} to {MAX_HEARTBEAT_S:g} "
            f"seconds, not {value!r}"
        )
    return float(value)


def _count(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{name} must be an int from {low} to {high}, not {value!r}")
    return value


def _short_text(value: object, name: str, max_chars: int, *, empty_ok: bool = False) -> str:
    text = check_text_id(value, name, 4 * max_chars, empty_ok=empty_ok)
    if len(text) > max_chars:
        raise InvalidInput(f"{name} must be at most {max_chars} characters")
    return text


def check_worker_beat(beat: object) -> WorkerBeat:
    """Return *beat* if it is a WorkerBeat whose every field is in range: a worker id, holder
    and host of at most 200 characters, a pid >= 0, a version of at most 64, a concurrency
    from 1 to 10,000, a heartbeat interval (:func:`check_heartbeat_every`), and at most
    *concurrency* busy slots of distinct indexes below it, each with a group id, a positive
    message id and a non-negative time held. Raises InvalidInput naming what is wrong."""
    if not isinstance(beat, WorkerBeat):
        raise InvalidInput(f"a heartbeat must be a WorkerBeat, not {type(beat).__name__}")
    check_worker_id(beat.id)
    _short_text(beat.holder, "holder", MAX_HOLDER_CHARS)
    _short_text(beat.host, "host", MAX_HOLDER_CHARS, empty_ok=True)
    _count(beat.pid, "pid", 0, 2**31 - 1)
    _short_text(beat.version, "version", _MAX_VERSION_CHARS, empty_ok=True)
    concurrency = _count(beat.concurrency, "concurrency", 1, MAX_SLOTS)
    check_heartbeat_every(beat.heartbeat_every)
    if not isinstance(beat.slots, tuple) or len(beat.slots) > concurrency:
        raise InvalidInput("slots must be a tuple of at most concurrency SlotBeat")
    seen: set[int] = set()
    for slot in beat.slots:
        if not isinstance(slot, SlotBeat):
            raise InvalidInput(f"a slot must be a SlotBeat, not {type(slot).__name__}")
        index = _count(slot.slot, "slot", 0, concurrency - 1)
        if index in seen:
            raise InvalidInput(f"slot {index} is reported twice")
        seen.add(index)
        check_text_id(slot.group_id, "group_id", MAX_GROUP_ID_BYTES)
        _count(slot.message_id, "message_id", 1, 2**63 - 1)
        held = slot.held_for
        if isinstance(held, bool) or not isinstance(held, int | float) or not math.isfinite(held):
            raise InvalidInput(f"held_for must be seconds, not {held!r}")
        if held < 0:
            raise InvalidInput(f"held_for must be >= 0, not {held!r}")
    return beat


def is_alive(last_heartbeat: float, heartbeat_every: float, now: float) -> bool:
    """Whether a worker whose last heartbeat was at *last_heartbeat* counts as alive at *now*:
    at most :data:`ALIVE_MULTIPLE` intervals ago."""
    return now - last_heartbeat <= ALIVE_MULTIPLE * heartbeat_every


def holds(holder: str, lease_holder: str | None) -> bool:
    """Whether a lease whose holder label is *lease_holder* was claimed by the worker whose
    holder prefix is *holder* (labels are ``host:pid:slot``)."""
    return lease_holder is not None and lease_holder.startswith(holder + ":")


def encode_slots(beat: WorkerBeat) -> str:
    """Return the busy slots of *beat* as JSON text (a list of objects with ``slot``,
    ``group_id``, ``message_id`` and ``held_for``), as the stores receive them."""
    return json.dumps(
        [
            {
                "slot": s.slot,
                "group_id": s.group_id,
                "message_id": s.message_id,
                "held_for": float(s.held_for),
            }
            for s in beat.slots
        ],
        ensure_ascii=False,
        separators=(",", ":"),
    )


def decode_slots(text: str | None, at: float) -> tuple[WorkerSlot, ...]:
    """Return the slots of :func:`encode_slots`'s *text*, each held since *at* minus its time
    held (*at*: the heartbeat's time on the store's clock), in slot order."""
    if not text:
        return ()
    items = json.loads(text)
    slots = [
        WorkerSlot(
            slot=int(item["slot"]),
            group_id=str(item["group_id"]),
            message_id=int(item["message_id"]),
            since=at - float(item["held_for"]),
        )
        for item in items
    ]
    return tuple(sorted(slots, key=lambda s: s.slot))


def worker_info(
    beat: WorkerBeat,
    *,
    queue: str,
    started_at: float,
    last_heartbeat: float,
    slots: tuple[WorkerSlot, ...],
    leases: tuple[WorkerLease, ...],
    now: float,
) -> WorkerInfo:
    """Return the :class:`WorkerInfo` of a stored worker at *now*: its last *beat*, when it
    registered and last heartbeat, its slots and the live *leases* held in its name (sorted by
    expiry, then group)."""
    return WorkerInfo(
        id=beat.id,
        holder=beat.holder,
        host=beat.host,
        pid=beat.pid,
        version=beat.version,
        queue=queue,
        concurrency=beat.concurrency,
        slots_busy=len(slots),
        started_at=started_at,
        last_heartbeat=last_heartbeat,
        heartbeat_every=beat.heartbeat_every,
        alive=is_alive(last_heartbeat, beat.heartbeat_every, now),
        slots=slots,
        leases=tuple(sorted(leases, key=lambda lease: (lease.expires_at, lease.group_id))),
    )


def worker_infos_of_rows(rows: Iterable[Sequence[Any]], queue: str) -> list[WorkerInfo]:
    """Return the workers of a store's rows, in row order: one row per worker and lease held in
    its name, ``(worker_id, holder, host, pid, version, concurrency, heartbeat_every, slots,
    started_at, last_heartbeat, now, group_id, message_id, lease_holder, expires_at)``, the
    lease columns None for a worker holding none; *now* is the store's time of the read."""
    infos: list[WorkerInfo] = []
    current: tuple[WorkerBeat, float, float, str, float] | None = None
    leases: list[WorkerLease] = []

    def flush() -> None:
        if current is not None:
            beat, started_at, last, slots, now = current
            infos.append(
                worker_info(
                    beat,
                    queue=queue,
                    started_at=started_at,
                    last_heartbeat=last,
                    slots=decode_slots(slots, last),
                    leases=tuple(leases),
                    now=now,
                )
            )

    for row in rows:
        (worker_id, holder, host, pid, version, concurrency, every, slots, started_at, last,
         now, group_id, message_id, lease_holder, expires_at) = row  # fmt: skip
        if current is None or current[0].id != worker_id:
            flush()
            leases = []
            beat = WorkerBeat(
                id=worker_id,
                holder=holder,
                host=host,
                pid=int(pid),
                version=version,
                concurrency=int(concurrency),
                heartbeat_every=float(every),
            )
            current = (beat, float(started_at), float(last), slots, float(now))
        if group_id is not None:
            leases.append(
                WorkerLease(
                    group_id=group_id,
                    message_id=int(message_id),
                    holder=lease_holder,
                    expires_at=float(expires_at),
                )
            )
    flush()
    return infos
