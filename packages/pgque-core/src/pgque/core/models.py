"""The values that cross the contract: :class:`Event`, :class:`Lease`, :class:`DeadLetter`,
:class:`ErrorInfo`, :class:`GroupInfo`, :class:`QueueStats` and :class:`Capabilities`."""

from __future__ import annotations

import json
import math
import os
import traceback as _traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal, get_args

import orjson
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, field_validator

from pgque.core.errors import InvalidInput

__all__ = [
    "Event",
    "ScheduledMessage",
    "Lease",
    "Settlement",
    "SettleOutcome",
    "SettleResult",
    "DeadLetter",
    "HistoryRecord",
    "HistoryOutcome",
    "WorkerInfo",
    "WorkerSlot",
    "WorkerLease",
    "HISTORY_OUTCOMES",
    "ErrorInfo",
    "GroupInfo",
    "GroupStateName",
    "GROUP_STATES",
    "ERROR_TYPE_CHARS",
    "ERROR_MESSAGE_CHARS",
    "ERROR_TRACEBACK_CHARS",
    "QueueStats",
    "KeyPolicy",
    "KeyInfo",
    "Capabilities",
    "describe_validation_error",
]


def describe_validation_error(exc: ValidationError, *, env_prefix: str | None = None) -> str:
    """Return *exc* as one human line: ``field: problem; other: problem``.

    pydantic's own text spans lines, repeats the input (which may be large or secret) and
    links to its website; a user needs only which field is wrong and why. With *env_prefix*
    (``PGQUE_``) fields are named as environment variables (``PGQUE_MAX_ATTEMPTS``).
    Raises nothing.
    """
    problems = []
    for error in exc.errors():
        parts = [str(part) for part in error["loc"]]
        if env_prefix is not None:
            where = env_prefix + "_".join(parts).upper() if parts else ""
        else:
            where = ".".join(parts)
        message = str(error["msg"])
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(problems) or "invalid value"


def random_ids(count: int) -> list[str]:
    """Return *count* new event ids: random version-4 UUIDs as 32 hex digits (what
    ``uuid.uuid4().hex`` gives), from one read of the system's randomness for all of them."""
    raw = bytearray(os.urandom(16 * count))
    raw[6::16] = bytes((b & 0x0F) | 0x40 for b in raw[6::16])  # version 4
    raw[8::16] = bytes((b & 0x3F) | 0x80 for b in raw[8::16])  # the RFC 4122 variant
    text = raw.hex()
    return [text[i : i + 32] for i in range(0, 32 * count, 32)]


def _new_id() -> str:
    return random_ids(1)[0]


def _now_utc() -> datetime:
    return datetime.now(timezone.utc)


#: What _check_json passes without a call of its own: plain scalars (not their subclasses,
#: which take the general path) and None.
_PLAIN = frozenset({str, int, bool, type(None)})


def _isoformat(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def compact_json(value: Any) -> str:
    """*value* as pgque stores JSON text: compact, UTF-8, a datetime as ``isoformat()``.

    orjson writes it in a tenth of the standard encoder's time; what orjson refuses (an int
    past 64 bits, a lone surrogate, a float subclass) the standard encoder writes or refuses
    (TypeError, ValueError) as it always did. The two differ only in floats in exponent form
    (orjson's ``1.5e-5``, the standard ``1.5e-05``), so one text is always made here.
    """
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(
            value, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_isoformat
        )


def _check_json(value: Any, path: str = "data") -> None:
    """Raise ValueError unless *value* is plain JSON (no NaN/inf, string keys)."""
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path}: {value!r} is not a JSON number")
        return
    # The members' paths are formatted only for a member that is checked by a call of its
    # own: most are plain scalars, and an event is checked at every publish.
    if isinstance(value, list):
        for i, item in enumerate(value):
            if type(item) not in _PLAIN:
                _check_json(item, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{path}: key {key!r} is not a string")
            if type(item) not in _PLAIN:
                _check_json(item, f"{path}.{key}")
        return
    raise ValueError(f"{path}: {type(value).__name__} is not a JSON value")


class Event(BaseModel):
    """A message: what happened (``kind``), its JSON payload (``data``) and metadata.

    Raises :class:`InvalidInput` when a field is invalid (for instance ``data`` that is not
    JSON). ``created_at`` is always timezone-aware UTC.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(default_factory=_new_id, min_length=1, max_length=256)
    kind: str = Field(min_length=1, max_length=256)
    data: JsonValue = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=_now_utc)

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise InvalidInput(f"invalid event: {describe_validation_error(exc)}") from exc

    @field_validator("data")
    @classmethod
    def _data_is_json(cls, value: JsonValue) -> JsonValue:
        _check_json(value)
        return value

    @field_validator("created_at")
    @classmethod
    def _aware_utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("created_at must be timezone-aware")
        return value.astimezone(timezone.utc)

    def to_json(self) -> str:
        """Serialise to compact JSON text; raises :class:`InvalidInput` if data is not JSON."""
        fields = {
            "id": self.id,
            "kind": self.kind,
            "data": self.data,
            "headers": self.headers,
            "created_at": self.created_at,
        }
        try:
            _check_json(self.data)
            return compact_json(fields)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"event is not JSON-serialisable: {exc}") from exc

    @classmethod
    def from_json(cls, text: str | bytes) -> Event:
        """Parse JSON text made by :meth:`to_json`; raises :class:`InvalidInput` if malformed."""
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise InvalidInput(f"event is not valid JSON: {exc}") from exc
        if not isinstance(raw, dict):
            raise InvalidInput("event JSON must be an object")
        return cls(**raw)


class Lease(BaseModel):
    """A claim on the head message of one group, valid while ``token`` is the group's token.

    ``attempt`` is 1 on first delivery. ``expires_at`` is epoch seconds by the server's clock.
    ``queue`` and ``origin`` tie the lease to the queue and store that issued it; a transport
    refuses a lease from elsewhere with :class:`InvalidInput`.
    """

    model_config = ConfigDict(frozen=True)

    group_id: str
    message_id: int
    event: Event
    token: str
    priority: int
    attempt: int
    expires_at: float
    queue: str = "default"
    origin: str = ""


#: What a :class:`Settlement` does with its lease: the four ways a finished lease ends.
SettleOutcome = Literal["ack", "nack", "release", "dead_letter"]


@dataclass(frozen=True, slots=True)
class Settlement:
    """One finished lease to settle in a ``settle_and_claim`` call: what ``ack``, ``nack``,
    ``release`` or ``dead_letter`` would do with it, sent with the next claim.

    Build one with :meth:`ack`, :meth:`nack`, :meth:`release` or :meth:`dead_letter`; the
    transport checks its fields (the lease is this queue's, *delay* a number of seconds,
    *reason* a valid reason for a dead letter, *error* an exception, a str or an ErrorInfo) before
    any I/O and raises InvalidInput otherwise.
    """

    lease: Lease
    outcome: SettleOutcome
    #: nack only: seconds the group stays parked (0: claimable again at once)
    delay: float = 0.0
    #: dead_letter only: why (``DeadLetter.reason``)
    reason: str = ""
    #: nack and dead_letter: the failure to record (``GroupInfo.last_error``, ``DeadLetter.error``)
    error: BaseException | str | ErrorInfo | None = None

    @classmethod
    def ack(cls, lease: Lease) -> Settlement:
        """Settle *lease* as ``ack(lease)`` would."""
        return cls(lease, "ack")

    @classmethod
    def nack(
        cls,
        lease: Lease,
        *,
        delay: float = 0.0,
        error: BaseException | str | ErrorInfo | None = None,
    ) -> Settlement:
        """Settle *lease* as ``nack(lease, delay=delay, error=error)`` would."""
        return cls(lease, "nack", delay=delay, error=error)

    @classmethod
    def release(cls, lease: Lease) -> Settlement:
        """Settle *lease* as ``release(lease)`` would."""
        return cls(lease, "release")

    @classmethod
    def dead_letter(
        cls, lease: Lease, reason: str, *, error: BaseException | str | ErrorInfo | None = None
    ) -> Settlement:
        """Settle *lease* as ``dead_letter(lease, reason, error=error)`` would."""
        return cls(lease, "dead_letter", reason=reason, error=error)


@dataclass(frozen=True, slots=True)
class SettleResult:
    """What one ``settle_and_claim`` call did.

    ``settled[i]`` is True if settlement *i* took effect, False if its lease was no longer
    held (fencing, as ``ack`` returns False); ``leases`` are the new leases, heads of distinct
    groups, at most the *n* asked for.
    """

    settled: list[bool]
    leases: list[Lease]


#: Bounds of a stored :class:`ErrorInfo`, in characters. A longer value is cut, never refused:
#: ``type`` and ``message`` keep their start, ``traceback`` keeps its end (the frame that
#: raised), and a cut is marked with :data:`_CUT_MARK`.
ERROR_TYPE_CHARS = 200
ERROR_MESSAGE_CHARS = 2_000
ERROR_TRACEBACK_CHARS = 16_000
_CUT_MARK = "[...cut...]"


def _clean_text(text: str) -> str:
    """*text* with NUL and lone surrogates replaced, so every backend can store it."""
    text = text.replace("\x00", "\ufffd")
    return text.encode("utf-8", "replace").decode("utf-8")


def _keep_start(text: str, limit: int) -> str:
    text = _clean_text(text)
    if len(text) <= limit:
        return text
    return text[: limit - len(_CUT_MARK)] + _CUT_MARK


def _keep_end(text: str, limit: int) -> str:
    text = _clean_text(text)
    if len(text) <= limit:
        return text
    return _CUT_MARK + text[len(text) - (limit - len(_CUT_MARK)) :]


def _type_name(exc: BaseException) -> str:
    cls = type(exc)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


class ErrorInfo(BaseModel):
    """Why a message failed: the exception's type, message and traceback, and when.

    ``type`` is the exception's class name, module-qualified unless it is a builtin
    (``ValueError``, ``myapp.errors.PaymentDeclined``), or ``"error"`` for a plain string.
    Stored bounded: ``type`` 200 characters, ``message`` 2,000 (the start is kept),
    ``traceback`` 16,000 (the end is kept, where the raising frame is); a cut is marked
    ``[...cut...]``. Build one with :meth:`capture`.
    """

    model_config = ConfigDict(frozen=True)

    type: str
    message: str
    traceback: str | None = None
    at: float

    @classmethod
    def capture(cls, error: BaseException | str, at: float) -> ErrorInfo:
        """Return the bounded record of *error* (an exception or a plain string) at *at*.

        Raises InvalidInput when *error* is neither an exception nor a str.
        """
        if isinstance(error, str):
            return cls(type="error", message=_keep_start(error, ERROR_MESSAGE_CHARS), at=at)
        if not isinstance(error, BaseException):
            raise InvalidInput(
                f"error must be an exception, a str or None, not {type(error).__name__}"
            )
        try:
            message = str(error)
        except Exception:  # a broken __str__ must not lose the failure
            message = f"<unprintable {type(error).__name__}>"
        trace: str | None = None
        if error.__traceback__ is not None:
            trace = "".join(_traceback.format_exception(error))
        return cls(
            type=_keep_start(_type_name(error), ERROR_TYPE_CHARS),
            message=_keep_start(message, ERROR_MESSAGE_CHARS),
            traceback=None if trace is None else _keep_end(trace, ERROR_TRACEBACK_CHARS),
            at=at,
        )

    def bounded(self) -> ErrorInfo:
        """This record with every field within the stored bounds (cut, never refused)."""
        return ErrorInfo(
            type=_keep_start(self.type, ERROR_TYPE_CHARS),
            message=_keep_start(self.message, ERROR_MESSAGE_CHARS),
            traceback=(
                None if self.traceback is None else _keep_end(self.traceback, ERROR_TRACEBACK_CHARS)
            ),
            at=self.at,
        )

    def to_json(self) -> str:
        """Compact JSON text, for backends that store the record as one value."""
        return json.dumps(
            {
                "type": self.type,
                "message": self.message,
                "traceback": self.traceback,
                "at": self.at,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> ErrorInfo:
        """Parse text made by :meth:`to_json`; raises InvalidInput if malformed."""
        try:
            raw = json.loads(text)
            return cls(**raw)
        except (ValueError, TypeError) as exc:
            raise InvalidInput(f"stored error is not valid: {exc}") from exc

    def summary(self) -> str:
        """``Type: message`` on one line (the message's first line), for logs and the CLI."""
        first = self.message.splitlines()[0] if self.message else ""
        return f"{self.type}: {first}" if first else self.type


class DeadLetter(BaseModel):
    """A message moved out of its group after failing; see ``redrive``.

    ``error`` is the last failure recorded for it (``nack``/``dead_letter`` with ``error=``),
    or ``None``.
    """

    model_config = ConfigDict(frozen=True)

    id: int
    group_id: str
    message_id: int
    event: Event
    priority: int
    attempts: int
    reason: str
    failed_at: float
    error: ErrorInfo | None = None


#: What a history record says happened to a message: a delivery settled (``acked``,
#: ``nacked``, ``released``, ``dead_lettered``), a head dead-lettered by ``max_attempts`` when a
#: claim reached it again (``exhausted``), or a dead letter put back (``redriven``).
HistoryOutcome = Literal["acked", "nacked", "released", "dead_lettered", "exhausted", "redriven"]
HISTORY_OUTCOMES: tuple[HistoryOutcome, ...] = get_args(HistoryOutcome)


class HistoryRecord(BaseModel):
    """One thing that happened to a message, kept by the queue's history (``history()``;
    docs/history.md).

    ``id`` orders the records of a queue (newer is larger; the paging cursor). ``attempt`` is
    the delivery the record is about (``acked`` on attempt 2: the second delivery succeeded).
    ``started_at`` is when that delivery's lease was granted and ``worker`` the lease's
    holder label (``None`` for ``exhausted`` and ``redriven``, which no delivery did);
    ``finished_at`` when it was settled, by the store's clock; ``published_at`` when the message
    joined its group. ``error`` is the error recorded with a nack or dead letter (else the
    message's last one) and ``reason`` a dead letter's reason.
    """

    model_config = ConfigDict(frozen=True)

    id: int
    message_id: int
    group_id: str
    kind: str
    fairness_key: str | None = None
    outcome: HistoryOutcome
    attempt: int
    published_at: float | None = None
    started_at: float | None = None
    finished_at: float
    worker: str | None = None
    error: ErrorInfo | None = None
    reason: str | None = None

    @property
    def duration(self) -> float | None:
        """Seconds from the lease to its settlement, or None without a lease."""
        return None if self.started_at is None else max(self.finished_at - self.started_at, 0.0)


class WorkerSlot(BaseModel):
    """What one busy slot of a live worker holds (``WorkerInfo.slots``): the message it runs
    and since when, by the store's clock (reported with the worker's last heartbeat)."""

    model_config = ConfigDict(frozen=True)

    slot: int
    group_id: str
    message_id: int
    since: float


class WorkerLease(BaseModel):
    """A lease the store still holds in a worker's name (``WorkerInfo.leases``): a group whose
    lease holder is one of the worker's labels (``host:pid:slot``) and has not expired yet.
    ``expires_at`` is when the group becomes claimable again if nobody renews the lease."""

    model_config = ConfigDict(frozen=True)

    group_id: str
    message_id: int
    holder: str
    expires_at: float


class WorkerInfo(BaseModel):
    """A worker of the queue, as its heartbeats left it (``workers()``; docs/workers.md).

    ``id`` is the worker's name (``host:pid`` unless given); ``holder`` the prefix of its
    claims' holder labels (``host:pid``), which finds its leases. ``started_at`` and
    ``last_heartbeat`` are by the store's clock; ``heartbeat_every`` is the interval the
    worker promised. ``alive`` is True while the last heartbeat is at most
    ``ALIVE_MULTIPLE x heartbeat_every`` old (:mod:`pgque.core.live_workers`); a worker that
    said goodbye is gone from the list, one that stopped without a goodbye stays (``alive``
    False) with the leases it still holds until its row is pruned. ``slots`` is what each busy
    slot held at the last heartbeat; ``leases`` what the store holds in the worker's name now.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    holder: str
    host: str
    pid: int
    version: str
    queue: str
    concurrency: int
    slots_busy: int
    started_at: float
    last_heartbeat: float
    heartbeat_every: float
    alive: bool
    slots: tuple[WorkerSlot, ...] = ()
    leases: tuple[WorkerLease, ...] = ()


class ScheduledMessage(BaseModel):
    """A message published with a ``delay`` that is not due yet (``scheduled()``).

    At ``due_at`` (epoch seconds, by the server's clock) it joins the tail of ``group_id``
    with the same ``id``; until then ``cancel(id)`` drops it. ``enqueued_at`` is when it was
    published.
    """

    model_config = ConfigDict(frozen=True)

    id: int
    group_id: str
    due_at: float
    kind: str
    priority: int
    enqueued_at: float


#: The states of a group, in precedence order: a group that is paused is listed as paused
#: whatever else holds; then blocked, leased, parked, ready.
GroupStateName = Literal["ready", "leased", "parked", "blocked", "paused"]
GROUP_STATES: tuple[GroupStateName, ...] = ("ready", "leased", "parked", "blocked", "paused")


class GroupInfo(BaseModel):
    """One group as an operator sees it (``group()`` / ``groups()``).

    ``state`` is ``paused`` while an operator hold is on (it wins over the others), else
    ``blocked`` (``on_exhausted="block"``), ``leased`` (a lease is out and unexpired),
    ``parked`` (a ``nack`` delay runs until ``resume_at``) or ``ready``.
    ``head_attempts`` counts the deliveries of the current head that counted (a ``release``
    does not). Times are epoch seconds by the server's clock. ``last_error`` is the head's
    latest recorded failure.
    """

    model_config = ConfigDict(frozen=True)

    group_id: str
    state: GroupStateName
    depth: int
    priority: int
    head_message_id: int | None = None
    head_enqueued_at: float | None = None
    head_attempts: int = 0
    lease_expires_at: float | None = None
    lease_holder: str | None = None
    resume_at: float | None = None
    last_error: ErrorInfo | None = None
    #: The group's fairness key (docs/fairness.md); ``None``: the default key.
    fairness_key: str | None = None


class KeyPolicy(BaseModel):
    """How claims treat one fairness key (``set_key_policy``; docs/fairness.md).

    ``weight``: its share against the other backlogged keys (3 gets three times the claims of
    1). ``max_in_flight``: at most that many of its groups leased at once (``None``: no cap).
    ``rate`` / ``per`` / ``burst``: at most ``rate`` claims per ``per`` seconds, ``burst`` at
    once (``None`` rate: no limit; ``None`` burst: ``max(1, ceil(rate))``). Build one checked
    with :func:`pgque.core.fairness.key_policy`.
    """

    model_config = ConfigDict(frozen=True)

    weight: float = 1.0
    max_in_flight: int | None = None
    rate: float | None = None
    per: float = 1.0
    burst: int | None = None


class KeyInfo(BaseModel):
    """One fairness key as an operator sees it (``keys()``).

    ``key`` is ``""`` for the groups published without one (listed as ``(no key)``).
    ``policy`` is what claims obey: the key's own (``own_policy`` True), else the default
    policy, else :class:`KeyPolicy`'s defaults. ``in_flight`` counts its groups leased now,
    ``groups`` its groups with messages, ``messages`` their messages (the backlog),
    ``oldest_age_s`` the age of its oldest message. ``tokens`` and ``next_token_at`` (epoch
    seconds, the store's clock) show its rate limit: ``None`` without one.
    """

    model_config = ConfigDict(frozen=True)

    key: str
    policy: KeyPolicy
    own_policy: bool = False
    in_flight: int = 0
    groups: int = 0
    messages: int = 0
    oldest_age_s: float | None = None
    tokens: float | None = None
    next_token_at: float | None = None


class QueueStats(BaseModel):
    """A snapshot of one queue.

    ``parked`` groups wait for a ``nack`` delay; ``blocked`` groups wait for an operator
    (``on_exhausted="block"``); ``paused`` groups are held by ``pause`` (counted there only,
    whatever else holds them); ``next_resume_at`` is when the earliest parked group becomes
    claimable again (epoch seconds), or ``None``.
    """

    model_config = ConfigDict(frozen=True)

    groups: int
    messages: int
    in_flight: int
    parked: int
    blocked: int
    dead_letters: int
    oldest_age_s: float | None
    next_resume_at: float | None = None
    paused: int = 0
    scheduled: int = 0
    next_due_at: float | None = None


@dataclass(frozen=True)
class Capabilities:
    """What a transport supports; the conformance suite gates tests on these flags.

    - ``injected_clock``: accepts ``clock=`` so tests can move time deterministically.
    - ``priorities``: honours ``priority`` and ``min_priority``.
    - ``dead_letters``: ``dead_letter``, ``dead_letters``, ``redrive`` and ``max_attempts``.
    - ``transactional_publish``: ``publish(..., connection=)`` joins the caller's transaction.
    - ``durable``: messages survive a restart of the process that holds the transport.
    - ``wakeups``: ``wait_for_messages(timeout)`` wakes idle workers
      (:class:`~pgque.core.SupportsWakeups` / :class:`~pgque.core.AsyncSupportsWakeups`).
    - ``purge``: ``purge()`` empties the queue
      (:class:`~pgque.core.SupportsPurge` / :class:`~pgque.core.AsyncSupportsPurge`).
    - ``queues``: ``queues()`` lists the store's queues
      (:class:`~pgque.core.SupportsQueues` / :class:`~pgque.core.AsyncSupportsQueues`).
    - ``scheduling``: ``publish(..., delay=)``, ``cancel``, ``scheduled``, ``publish_tick`` and
      ``last_tick`` (docs/scheduling.md).
    - ``fairness``: ``publish(..., fairness_key=)``, ``set_key_policy``, ``key_policy``,
      ``delete_key_policy`` and ``keys``: weighted shares, caps and rates per key
      (docs/fairness.md).
    - ``settle_in``: ``settle_in(lease, connection)`` settles a lease in the caller's
      transaction, with the caller's writes (:class:`~pgque.core.SupportsSettleIn`;
      docs/transactions.md).
    - ``history``: the transport option ``history`` records what happened to each message and
      ``history()`` reads it (:class:`~pgque.core.SupportsHistory`; docs/history.md).
    - ``browse``: ``messages()`` lists the messages behind their groups' heads (by group, by
      kind), ``message(id)`` finds one and ``scheduled(group_id=)`` a group's scheduled ones
      (:class:`~pgque.core.SupportsBrowse`; docs/reference.md).
    - ``workers``: workers register and heartbeat, and ``workers()`` lists them with what
      their slots and leases hold (:class:`~pgque.core.SupportsWorkers`; docs/workers.md).

    Five promises hold across the whole queue on one store and only per shard over the sharded
    layer (:class:`~pgque.sharding.ShardedTransport`, docs/scaling.md); the conformance
    suite relaxes exactly the tests that rely on each when it is off:

    - ``global_id_order``: message ids grow in publish order across *all* groups (off: only
      within a group, and within a shard).
    - ``global_fairness``: ``claim`` serves the longest-unserved group of the whole queue, so
      groups are served in strict round-robin (off: round-robin within each shard, shards
      taken in turn).
    - ``atomic_stats``: ``stats()`` is one snapshot, its counts consistent with each other
      (off: a sum of per-shard snapshots taken one after another).
    - ``atomic_batches``: ``publish_many``, ``ack_many`` and ``settle_and_claim`` over several
      groups are each one atomic step (off: atomic per shard only; a failure can leave the
      part sent to other shards applied).
    - ``global_key_limits``: a fairness key's weight, ``max_in_flight`` and rate bound the whole
      queue (off: each shard applies them to the key's groups on that shard, so a cap of 5 over
      three shards allows up to 15 leases, and keys share each shard's claims).
    """

    injected_clock: bool = True
    priorities: bool = True
    dead_letters: bool = True
    transactional_publish: bool = False
    durable: bool = False
    wakeups: bool = False
    purge: bool = False
    queues: bool = False
    scheduling: bool = False
    fairness: bool = False
    settle_in: bool = False
    history: bool = False
    browse: bool = False
    workers: bool = False
    global_id_order: bool = True
    global_fairness: bool = True
    atomic_stats: bool = True
    atomic_batches: bool = True
    global_key_limits: bool = True
