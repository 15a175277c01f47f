"""What the blocking and asyncio Redis transports share: options, keys, decoding, errors."""

from __future__ import annotations

import enum
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit

from redis.exceptions import BusyLoadingError

from pgque.core.errors import (
    ConfigurationError,
    ConnectionLost,
    InvalidInput,
    PgqueError,
    QueueMoving,
    SchemaMismatch,
)
from pgque.core.models import (
    GROUP_STATES,
    Capabilities,
    DeadLetter,
    ErrorInfo,
    Event,
    GroupInfo,
    GroupStateName,
    Lease,
    QueueStats,
    ScheduledMessage,
    Settlement,
)
from pgque.core.options import bounded_float, bounded_int
from pgque.core.urls import mask_url
from pgque.core.validation import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_EVENT_BYTES,
    MAX_EVENT_BYTES_LIMIT,
    CheckedSettlement,
    OnExhausted,
    TransportOptions,
    check_error,
    check_queue_name,
)

__all__ = [
    "CAPABILITIES",
    "ORIGIN",
    "holder_arg",
    "SCHEMES",
    "CLUSTER_SCHEMES",
    "cluster_seeds",
    "script_keys",
    "script_flags",
    "script_refusal",
    "moving_error",
    "unreplicated",
    "OWN_OPTIONS",
    "RedisOptions",
    "NotGiven",
    "NOT_GIVEN",
    "resolve_options",
    "key_prefix",
    "QUEUE_MARKER_PATTERNS",
    "queue_of_marker",
    "now_arg",
    "new_nonce",
    "text",
    "UNDECODABLE_KIND",
    "Undecodable",
    "decode_leases",
    "decode_dead_letters",
    "decode_stats",
    "decode_scheduled",
    "MAX_MESSAGE_ID",
    "JOIN_BATCH",
    "scheduled_after",
    "wait_cap",
    "GROUPS_SCAN_BUDGET",
    "decode_group",
    "decode_groups_page",
    "error_args",
    "settlement_args",
    "dead_letter_after",
    "nothing_sent",
    "refused",
    "connection_lost",
    "wrap_error",
]

CAPABILITIES = Capabilities(
    injected_clock=True,
    priorities=True,
    dead_letters=True,
    transactional_publish=False,
    # Redis acknowledges a write before it reaches disk unless AOF runs with
    # appendfsync always; the transport cannot know, so it does not promise durability.
    durable=False,
    wakeups=True,  # the queue's pub/sub wake channel
    purge=True,
    queues=True,
    scheduling=True,  # scheduled messages and tick records in the queue's keys
)

#: How Lease.origin of every lease this backend issues starts; the rest names the queue's store
#: (``redis:<identity>``, the value of the queue's meta key: see lua/lib/store.lua's touch_meta).
ORIGIN = "redis"

#: URL schemes of a Redis Cluster: ``redis+cluster://host:port[,host:port...]/`` (seed nodes),
#: ``rediss+cluster://`` with TLS.
CLUSTER_SCHEMES = frozenset({"redis+cluster", "rediss+cluster"})
SCHEMES = frozenset({"redis", "rediss", "unix"}) | CLUSTER_SCHEMES

#: Query options pgque reads and removes before handing the URL to redis-py.
OWN_OPTIONS = frozenset(
    {
        "queue",
        "max_attempts",
        "on_exhausted",
        "retries",
        "retry_backoff",
        "retry_refused",
        "max_event_bytes",
        "wait_replicas",
        "wait_timeout",
        "connect_timeout",
    }
)

#: How long reaching the server may take by default (``connect_timeout``, seconds): the
#: connect, the TLS handshake and the first reply, pgque's retries included.
DEFAULT_CONNECT_TIMEOUT = 10.0

#: How long a write waits for its replicas by default (``wait_timeout``, seconds).
DEFAULT_WAIT_TIMEOUT = 1.0

DEFAULT_RETRIES = 5
DEFAULT_RETRY_BACKOFF = 0.05
#: The longest single pause between two connection attempts.
MAX_RETRY_PAUSE = 2.0


class NotGiven(enum.Enum):
    """The type of :data:`NOT_GIVEN`."""

    NOT_GIVEN = "not given"


#: The default of ``max_attempts=``: take the URL's ``max_attempts``, else
#: :data:`~pgque.core.validation.DEFAULT_MAX_ATTEMPTS` (``None`` means unlimited).
NOT_GIVEN: Final = NotGiven.NOT_GIVEN


@dataclass(frozen=True)
class RedisOptions:
    """Everything a Redis transport is configured with, validated.

    ``url`` is the URL for redis-py with pgque's own query options removed (``None`` for an
    injected client); ``masked_url`` is safe to show.
    """

    url: str | None
    masked_url: str
    common: TransportOptions
    retries: int
    retry_backoff: float
    retry_refused: bool = True
    #: The seeds of a Redis Cluster URL (``redis+cluster://``) as (host, port); ``url`` is then
    #: a ``redis://`` or ``rediss://`` URL of the first seed. Empty for one server.
    seeds: tuple[tuple[str, int], ...] = ()
    #: Replicas every write must reach before it returns (``WAIT``); 0: no wait.
    wait_replicas: int = 0
    #: How long a write waits for them, in seconds.
    wait_timeout: float = DEFAULT_WAIT_TIMEOUT
    #: How long reaching the server may take, retries included, in seconds.
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT

    @property
    def cluster(self) -> bool:
        """Whether the URL names a Redis Cluster (it has seeds)."""
        return bool(self.seeds)


def _split_url(url: str) -> tuple[str, dict[str, str]]:
    """Return *url* without pgque's options, and those options."""
    if not isinstance(url, str):
        raise ConfigurationError(f"a Redis URL must be a str, not {type(url).__name__}")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigurationError(f"invalid Redis URL {mask_url(url)}: {exc}") from exc
    if parts.scheme.lower() not in SCHEMES:
        raise ConfigurationError(
            "not a Redis URL (redis://, rediss://, unix://, redis+cluster:// or "
            f"rediss+cluster://): {mask_url(url)}"
        )
    own: dict[str, str] = {}
    kept: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in OWN_OPTIONS:
            if key in own:
                raise ConfigurationError(f"option {key!r} is given twice in {mask_url(url)}")
            own[key] = value
        else:
            kept.append((key, value))
    # Not urlunsplit: it turns unix:///path into unix:/path, which redis-py refuses.
    stripped = f"{parts.scheme}://{parts.netloc}{parts.path}"
    if kept:
        stripped += f"?{urlencode(kept)}"
    if parts.fragment:
        stripped += f"#{parts.fragment}"
    return stripped, own


def resolve_options(
    url: str | None,
    *,
    has_client: bool,
    queue: str | None,
    max_attempts: int | NotGiven | None,
    on_exhausted: OnExhausted | None,
    clock: Callable[[], float] | None,
    retries: int | None,
    retry_backoff: float | None,
    max_event_bytes: int | None = None,
    retry_refused: bool | None = None,
    wait_replicas: int | None = None,
    wait_timeout: float | None = None,
    connect_timeout: float | None = None,
) -> RedisOptions:
    """Merge keyword options over the URL's query options (keywords win) and validate them.

    ``max_attempts`` left :data:`NOT_GIVEN` is the URL's (``none`` or empty: unlimited), else
    :data:`~pgque.core.validation.DEFAULT_MAX_ATTEMPTS`; ``None`` is unlimited.
    Raises ConfigurationError for a bad URL or option value, or when neither or both of a URL
    and a client are given; InvalidInput for a bad queue name, max_attempts or on_exhausted.
    """
    if has_client == (url is not None):
        raise ConfigurationError("give a Redis URL or a client (exactly one of them)")
    own: dict[str, str] = {}
    redis_url: str | None = None
    masked = "<injected redis client>"
    seeds: tuple[tuple[str, int], ...] = ()
    if url is not None:
        redis_url, own = _split_url(url)
        masked = mask_url(url)
        if urlsplit(redis_url).scheme.lower() in CLUSTER_SCHEMES:
            redis_url, seeds = cluster_seeds(redis_url)
    chosen_max: object = max_attempts
    if max_attempts is NOT_GIVEN:
        if "max_attempts" not in own:
            chosen_max = DEFAULT_MAX_ATTEMPTS
        elif own["max_attempts"].strip().lower() in {"", "none"}:
            chosen_max = None  # unlimited
        else:
            chosen_max = bounded_int("max_attempts", own["max_attempts"], 1, 2**31 - 1)
    common = TransportOptions(
        queue=queue if queue is not None else own.get("queue", "default"),
        max_attempts=chosen_max,  # type: ignore[arg-type]  # TransportOptions checks it
        on_exhausted=on_exhausted or own.get("on_exhausted", "dead_letter"),  # type: ignore[arg-type]
        clock=clock,
        max_event_bytes=(
            max_event_bytes
            if max_event_bytes is not None
            else bounded_int(
                "max_event_bytes",
                own.get("max_event_bytes", DEFAULT_MAX_EVENT_BYTES),
                1,
                MAX_EVENT_BYTES_LIMIT,
            )
        ),
    )
    return RedisOptions(
        url=redis_url,
        masked_url=masked,
        common=common,
        retries=bounded_int(
            "retries",
            retries if retries is not None else own.get("retries", DEFAULT_RETRIES),
            0,
            100,
        ),
        retry_backoff=bounded_float(
            "retry_backoff",
            retry_backoff
            if retry_backoff is not None
            else own.get("retry_backoff", DEFAULT_RETRY_BACKOFF),
            0.0,
            MAX_RETRY_PAUSE,
        ),
        retry_refused=(
            bool(retry_refused)
            if retry_refused is not None
            else _bool_option("retry_refused", own.get("retry_refused", "1"))
        ),
        seeds=seeds,
        wait_replicas=bounded_int(
            "wait_replicas",
            wait_replicas
            if wait_replicas is not None
            # A cluster URL waits for one replica by default: a failover then loses no write
            # that returned.
            else own.get("wait_replicas", 1 if seeds else 0),
            0,
            100,
        ),
        wait_timeout=bounded_float(
            "wait_timeout",
            wait_timeout
            if wait_timeout is not None
            else own.get("wait_timeout", DEFAULT_WAIT_TIMEOUT),
            0.001,
            60.0,
        ),
        connect_timeout=bounded_float(
            "connect_timeout",
            connect_timeout
            if connect_timeout is not None
            else own.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT),
            0.001,
            3600.0,
        ),
    )


def _seed(text: str, url: str) -> tuple[str, int]:
    """Return (host, port) of one seed ``host[:port]`` (``[v6]:port`` too) of *url*."""
    host, port = text, "6379"
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ConfigurationError(f"bad seed node {text!r} in {mask_url(url)}")
        port = rest[1:] or port
    elif ":" in text:
        host, port = text.rsplit(":", 1)
    if not host:
        raise ConfigurationError(f"a seed node without a host in {mask_url(url)}")
    return host, bounded_int("port", port, 1, 65535)


def cluster_seeds(url: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    """Split a ``redis+cluster://[user:password@]host:port[,host:port...][/0][?options]`` URL
    (pgque's own options removed) into a ``redis://`` (``rediss://``) URL of its first seed,
    with its credentials and options, for redis-py, and every seed as (host, port).

    Raises ConfigurationError for no seed, a bad seed or port, or a database other than 0 (a
    cluster has only database 0).
    """
    parts = urlsplit(url)
    userinfo, _, hosts = parts.netloc.rpartition("@")
    seeds = tuple(_seed(item.strip(), url) for item in hosts.split(",") if item.strip())
    if not seeds:
        raise ConfigurationError(f"a Redis Cluster URL names no seed node: {mask_url(url)}")
    if parts.path.strip("/") not in {"", "0"}:
        raise ConfigurationError(
            f"a Redis Cluster has only database 0, not {parts.path.strip('/')!r}: {mask_url(url)}"
        )
    scheme = "rediss" if parts.scheme.lower() == "rediss+cluster" else "redis"
    host, port = seeds[0]
    shown = f"[{host}]" if ":" in host else host
    first = f"{scheme}://{userinfo + '@' if userinfo else ''}{shown}:{port}/0"
    if parts.query:
        first += f"?{parts.query}"
    return first, seeds


_BOOLS = {"1": True, "true": True, "yes": True, "on": True}
_BOOLS.update({"0": False, "false": False, "no": False, "off": False})


def _bool_option(name: str, value: str) -> bool:
    try:
        return _BOOLS[value.lower()]
    except KeyError as exc:
        raise ConfigurationError(f"option {name} must be a boolean, not {value!r}") from exc


#: What a script's refusal (``refuse`` in ``lua/lib/refusals.lua``) starts with, before its kind.
_REFUSAL_MARK = "pgque: "

#: The error each kind of script refusal is raised as.
_REFUSAL_ERRORS: Final[dict[str, type[PgqueError]]] = {
    "slot moving": QueueMoving,
    "key layout": SchemaMismatch,
    "bad input": InvalidInput,
}


def script_refusal(exc: BaseException) -> PgqueError | None:
    """Return the typed error a script's refusal in *exc* is raised as (its message only),
    else None.

    Scripts refuse with ``"pgque: <kind>: <message>"`` (``refuse`` in ``lua/lib/refusals.lua``).
    Redis 7 passes that text through with `` script: <sha>, on @user_script:N.`` after it; Redis
    6.2 puts ``Error running script (call to f_<sha>): @user_script:N: `` before it. Both are
    cut off here, so the refusal reads and is typed the same on every supported Redis.
    """
    message = str(exc)
    for kind, error in _REFUSAL_ERRORS.items():
        mark = f"{_REFUSAL_MARK}{kind}: "
        start = message.find(mark)
        if start >= 0:
            text = message[start + len(mark) :]
            return error(text.split(" script: ")[0])
    return None


def script_keys(prefix: str) -> tuple[str, str]:
    """Return the keys every script declares: the queue's meta key and its fence
    (``lua/lib/keys.lua``).

    The fence never exists; declaring it with the meta key makes Redis Cluster refuse the
    script (TRYAGAIN) on both nodes while the queue's slot is migrating.
    """
    return prefix + "meta", prefix + "fence"


def script_flags(known: bool, sharded: bool) -> str:
    """Return the flags argument of every script (``lua/lib/keys.lua``): ``k`` when the caller
    wrote to the queue before (its meta key must exist), ``s`` for sharded wake-ups (SPUBLISH)."""
    return ("k" if known else "") + ("s" if sharded else "")


def moving_error(exc: BaseException, masked_url: str) -> PgqueError | None:
    """Return the QueueMoving to raise for *exc* when it says the queue's slot is moving (a
    script's refusal, TRYAGAIN, or redirects that never settle), else None."""
    refusal = script_refusal(exc)
    if isinstance(refusal, QueueMoving):
        return QueueMoving(f"Redis at {masked_url} refused the call: {refusal}")
    message = str(exc)
    name = type(exc).__name__
    if name in {"TryAgainError", "AskError"} or "TTL exhausted" in message or "TRYAGAIN" in message:
        return QueueMoving(
            f"Redis at {masked_url} refused the call while the queue's hash slot is migrating "
            f"(TRYAGAIN); nothing was changed: retry once the slot is stable: {exc}"
        )
    return None


def unreplicated(acked: object, options: RedisOptions) -> ConnectionLost | None:
    """Return the ConnectionLost to raise when ``WAIT`` answered *acked* replicas, fewer than
    ``options.wait_replicas``; else None."""
    count = int(text(acked))
    if count >= options.wait_replicas:
        return None
    return ConnectionLost(
        f"Redis at {options.masked_url} applied the write, but only {count} of "
        f"{options.wait_replicas} replica(s) confirmed it within {options.wait_timeout} s: "
        "a failover now could lose it",
        maybe_applied=True,
    )


def refused(exc: BaseException) -> bool:
    """Tell whether *exc* says that nothing listens at the address (no server there now)."""
    message = str(exc)
    return "Connection refused" in message or "No such file or directory" in message


def key_prefix(queue: str) -> str:
    """Return the prefix of every key of *queue*; its hash tag pins the queue to one slot."""
    return f"{{pgque:{queue}}}:"


#: SCAN patterns of the keys that exist exactly while a queue holds messages (``enq``), dead
#: letters (``dead``), groups (``groups``: a paused group may have no message) or scheduled
#: messages (``sched``); Redis deletes a sorted set when its last member goes.
QUEUE_MARKER_PATTERNS = ("{pgque:*}:enq", "{pgque:*}:dead", "{pgque:*}:groups", "{pgque:*}:sched")
_MARKERS = tuple(pattern[len("{pgque:*}") :] for pattern in QUEUE_MARKER_PATTERNS)


def queue_of_marker(key: str) -> str | None:
    """Return the queue whose ``enq``/``dead``/``groups``/``sched`` key *key* is, else None.

    The glob ``*`` also matches a group's list key whose group id ends in ``}:enq``; a queue
    name never holds ``}``, so the hash tag ends at the first one and the rest must be exact.
    """
    if not key.startswith("{pgque:"):
        return None
    name, sep, rest = key[len("{pgque:") :].partition("}")
    if not sep or rest not in _MARKERS:
        return None
    try:
        return check_queue_name(name)
    except InvalidInput:
        return None


def now_arg(clock: Callable[[], float] | None) -> str:
    """Return the script's "now" argument: the injected clock's time, or "" (server TIME)."""
    if clock is None:
        return ""
    now = float(clock())
    if not math.isfinite(now):
        raise PgqueError(f"the injected clock returned {now!r}")
    return repr(now)


def new_nonce() -> str:
    """Return a random prefix for the fencing tokens of one claim call (128 random bits)."""
    return os.urandom(16).hex()


def text(value: object) -> str:
    """Return a reply element as str (clients may or may not decode responses)."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, str):
        return value
    return str(value)


#: The kind of the stand-in event a dead letter shows when its stored text is not an Event.
UNDECODABLE_KIND = "pgque.undecodable"
#: How much of undecodable text a stand-in event or a dead letter's reason quotes.
_QUOTE_CHARS = 1000


@dataclass(frozen=True)
class Undecodable:
    """A claimed head whose stored event could not be decoded: its lease's fields as Redis sent
    them (bytes or str), to hand back to the dead-letter script unchanged."""

    group_id: str | bytes
    message_id: str | bytes
    token: str | bytes
    reason: str


def _undecodable_reason(exc: BaseException) -> str:
    detail = " ".join(str(exc).split())[:_QUOTE_CHARS]
    return f"undecodable event: {type(exc).__name__}: {detail}"


def decode_leases(
    raw: Sequence[Any], queue: str, origin: str
) -> tuple[list[Lease], list[Undecodable]]:
    """Turn the claim script's flat reply (7 strings per lease) into leases, one at a time.

    A head whose message id or event does not decode (text written by hand or damaged) is
    returned apart as an :class:`Undecodable`, so the caller can dead-letter it through its
    lease and still hand out the others.
    """
    leases: list[Lease] = []
    bad: list[Undecodable] = []
    for i in range(0, len(raw), 7):
        try:
            # The script writes priority, attempt and expiry itself (ASCII numbers, which int()
            # and float() read from bytes or str alike); the stored texts are decoded first.
            lease = Lease(
                group_id=text(raw[i]),
                message_id=int(text(raw[i + 1])),
                event=Event.from_json(text(raw[i + 2])),
                token=text(raw[i + 3]),
                priority=int(raw[i + 4]),
                attempt=int(raw[i + 5]),
                expires_at=float(raw[i + 6]),
                queue=queue,
                origin=origin,
            )
        except (ValueError, TypeError) as exc:  # InvalidInput and UnicodeDecodeError included
            bad.append(Undecodable(raw[i], raw[i + 1], raw[i + 3], _undecodable_reason(exc)))
            continue
        leases.append(lease)
    return leases, bad


def _stand_in(raw: object) -> Event:
    """Return the event a dead letter shows when its stored text is not an Event."""
    shown = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
    return Event(kind=UNDECODABLE_KIND, data={"raw": shown[:_QUOTE_CHARS]})


def _int_or_zero(value: object) -> int:
    try:
        return int(text(value))
    except ValueError:
        return 0  # ids start at 1: 0 says the stored id was no message id


def _lenient(value: object) -> str:
    """Return a reply element as str, escaping bytes that are not UTF-8 (``\\xff``)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    return text(value)


def _stored_error(value: object) -> ErrorInfo | None:
    """Return a stored error record ("" for none); one that does not decode is shown as a
    record of type ``pgque.undecodable`` quoting its text."""
    if value in ("", b""):
        return None
    try:
        return ErrorInfo.from_json(text(value))
    except (ValueError, TypeError):  # InvalidInput and UnicodeDecodeError included
        shown = _lenient(value)[:_QUOTE_CHARS]
        return ErrorInfo(type=UNDECODABLE_KIND, message=shown, at=0.0)


def decode_dead_letters(raw: Sequence[Any]) -> list[DeadLetter]:
    """Turn the dead_letters script's flat reply (9 strings each) into DeadLetter objects.

    A dead letter whose stored event does not decode shows a stand-in event of kind
    ``pgque.undecodable`` quoting the text in ``data["raw"]`` (the store keeps the text as it
    was); a stored message id that is no integer shows as 0; a group id or reason that is not
    UTF-8 (such heads are dead-lettered on purpose) shows its bad bytes escaped (``\\xff``).
    """
    out: list[DeadLetter] = []
    for i in range(0, len(raw), 9):
        try:
            event = Event.from_json(text(raw[i + 3]))
        except (ValueError, TypeError):
            event = _stand_in(raw[i + 3])
        out.append(
            DeadLetter(
                id=int(text(raw[i])),
                group_id=_lenient(raw[i + 1]),
                message_id=_int_or_zero(raw[i + 2]),
                event=event,
                priority=int(text(raw[i + 4])),
                attempts=int(text(raw[i + 5])),
                reason=_lenient(raw[i + 6]),
                failed_at=float(text(raw[i + 7])),
                error=_stored_error(raw[i + 8]),
            )
        )
    return out


def decode_stats(raw: Sequence[Any]) -> QueueStats:
    """Turn the stats script's reply into QueueStats."""
    items = [text(v) for v in raw]
    now = float(items[8])
    return QueueStats(
        groups=int(items[0]),
        messages=int(items[1]),
        in_flight=int(items[2]),
        parked=int(items[3]),
        blocked=int(items[4]),
        dead_letters=int(items[5]),
        oldest_age_s=None if not items[6] else max(0.0, now - float(items[6])),
        next_resume_at=float(items[7]) if items[7] else None,
        paused=int(items[9]),
        scheduled=int(items[10]),
        next_due_at=float(items[11]) if items[11] else None,
    )


#: Strings per message in the scheduled script's reply.
_SCHEDULED_FIELDS = 6


def decode_scheduled(raw: Sequence[Any]) -> list[ScheduledMessage]:
    """Turn the scheduled script's flat reply (6 strings each) into ScheduledMessage objects.

    A stored event that does not decode shows the kind ``pgque.undecodable``.
    """
    out: list[ScheduledMessage] = []
    for i in range(0, len(raw), _SCHEDULED_FIELDS):
        try:
            kind = Event.from_json(text(raw[i + 3])).kind
        except (ValueError, TypeError):
            kind = UNDECODABLE_KIND
        out.append(
            ScheduledMessage(
                id=int(text(raw[i])),
                group_id=_lenient(raw[i + 1]),
                due_at=float(text(raw[i + 2])),
                kind=kind,
                priority=int(text(raw[i + 4])),
                enqueued_at=float(text(raw[i + 5])),
            )
        )
    return out


#: How many due scheduled messages one join_due script call moves at most (as one claim does).
JOIN_BATCH = 1000

#: Message ids are below this (a Redis score holds them exactly; a scheduled message's key has
#: 16 digits).
MAX_MESSAGE_ID = 2**53


def scheduled_after(after: int | None) -> str:
    """Return the scheduled script's ``after`` argument ("" for None), within score range."""
    if after is None:
        return ""
    return str(max(0, min(after, MAX_MESSAGE_ID)))


def wait_cap(reply: Sequence[Any], timeout: float) -> float | None:
    """Return how long an idle wait of *timeout* seconds may last given the next_due script's
    *reply*: until the next due time (a millisecond past it, so the message is due when the
    waiter claims), or None when nothing is scheduled sooner than *timeout*."""
    due = text(reply[0])
    if not due:
        return None
    left = max(0.0, float(due) - float(text(reply[1]))) + 0.001
    return left if left < timeout else None


#: How many group ids one call of the groups script examines at most. A page filtered by a
#: state the index does not hold (ready, leased, parked) is built by as many calls as it needs,
#: each going on after the last id the previous one examined, so Redis is never held for long.
GROUPS_SCAN_BUDGET = 500

_STATES: dict[str, GroupStateName] = {state: state for state in GROUP_STATES}
#: Strings per group in the group and groups scripts' replies.
_GROUP_FIELDS = 11


def _optional_float(value: object) -> float | None:
    shown = text(value)
    return float(shown) if shown else None


def _group_info(raw: Sequence[Any], i: int) -> GroupInfo:
    head = text(raw[i + 4]) if raw[i + 4] not in ("", b"") else None
    holder = _lenient(raw[i + 8])
    return GroupInfo(
        group_id=_lenient(raw[i]),
        state=_STATES[text(raw[i + 1])],
        depth=int(text(raw[i + 2])),
        priority=int(text(raw[i + 3])),
        head_message_id=None if head is None else _int_or_zero(head),
        head_enqueued_at=_optional_float(raw[i + 5]),
        head_attempts=int(text(raw[i + 6])),
        lease_expires_at=_optional_float(raw[i + 7]),
        lease_holder=holder or None,
        resume_at=_optional_float(raw[i + 9]),
        last_error=_stored_error(raw[i + 10]),
    )


def decode_group(raw: Sequence[Any]) -> GroupInfo | None:
    """Turn the group script's reply (11 strings, or none) into a GroupInfo or None."""
    return _group_info(raw, 0) if raw else None


def decode_groups_page(raw: Sequence[Any]) -> tuple[bool, bytes | str | None, list[GroupInfo]]:
    """Turn one groups script reply into (index ended, last id examined or None, groups)."""
    ended = text(raw[0]) == "1"
    last = raw[1] if raw[1] not in ("", b"") else None
    infos = [_group_info(raw, i) for i in range(2, len(raw), _GROUP_FIELDS)]
    return ended, last, infos


#: What a record's JSON ends with when its time is 0.0; the script puts the time in its place.
_AT_TAIL = "0.0}"


def error_args(error: object) -> tuple[str, str]:
    """Return the script arguments for *error* (``error=`` of nack and dead_letter).

    The first is the record's JSON (:meth:`ErrorInfo.to_json`) up to its time, the second the
    time: an ErrorInfo's own, or "" for the script's "now" (the server's clock, or the
    injected one), so a record made from an exception or a string is timed like every other
    time of the queue. ("", "") for None. Raises InvalidInput for anything else, or an
    ErrorInfo whose time is not a finite number.
    """
    return record_args(check_error(error, 0.0), isinstance(error, ErrorInfo))


def record_args(info: ErrorInfo | None, own_time: bool) -> tuple[str, str]:
    """Return the script arguments for the checked record *info* (see :func:`error_args`).

    *own_time* says the caller gave an ErrorInfo whole, so its ``at`` is kept; otherwise the
    script times the record. Raises InvalidInput for an own time that is not finite.
    """
    if info is None:
        return "", ""
    stamp = ""
    if own_time:
        if not math.isfinite(info.at):
            raise InvalidInput(f"an error's time must be a finite number, not {info.at!r}")
        stamp = repr(float(info.at))
    whole = info.model_copy(update={"at": 0.0}).to_json()
    if not whole.endswith('"at":' + _AT_TAIL):  # pragma: no cover - ErrorInfo.to_json changed
        raise PgqueError("ErrorInfo.to_json no longer ends with its time")
    return whole[: -len(_AT_TAIL)], stamp


def settlement_args(
    checked: Sequence[CheckedSettlement], given: Sequence[Settlement]
) -> list[str | int]:
    """Return the settle_claim script's 7 arguments per settlement (see settle_claim.lua).

    *checked* is ``check_settlements(given, ...)``, captured at time 0: an error made from an
    exception or a str is timed by the script, an ErrorInfo given whole keeps its own time
    (as ``nack`` and ``dead_letter`` do). Raises InvalidInput for an ErrorInfo whose time is
    not a finite number.
    """
    args: list[str | int] = []
    for item, original in zip(checked, given, strict=True):
        lease = item.lease
        outcome = item.outcome
        if outcome == "ack" or outcome == "release":
            args += [outcome, lease.group_id, lease.token, lease.message_id, "", "", ""]
            continue
        record, at = record_args(item.error, isinstance(original.error, ErrorInfo))
        extra = repr(item.delay) if outcome == "nack" else item.reason
        args += [outcome, lease.group_id, lease.token, lease.message_id, extra, record, at]
    return args


#: Dead-letter ids are below this (they are integers a Redis score holds exactly).
_MAX_SCORE_INT = 2**53


def dead_letter_after(after: int | None) -> str:
    """Return the dead_letters script's ``after`` argument ("" for None), within score range."""
    if after is None:
        return ""
    return str(max(-_MAX_SCORE_INT, min(after, _MAX_SCORE_INT)))


def nothing_sent(exc: BaseException) -> bool:
    """Tell whether *exc* arose while opening a connection, so no command reached Redis.

    redis-py opens (or re-checks) a pooled connection before it writes a command and words
    those failures "... connecting to ..."; a server still loading its data refuses every
    command. Any other connection error may have struck after the script ran.
    """
    if isinstance(exc, BusyLoadingError):  # the server refused the command while loading
        return True
    message = str(exc)
    return "connecting to" in message or "Timeout connecting" in message


def connection_lost(
    exc: BaseException, masked_url: str, sent: bool, connect_timeout: float | None = None
) -> ConnectionLost:
    """Return the ConnectionLost to raise for *exc* (the caller chains it with ``from``);
    a connection never opened names the *connect_timeout* it was tried within."""
    if sent:
        return ConnectionLost(
            f"lost the connection to Redis at {masked_url} after sending a command; "
            f"a write may or may not have been applied: {exc}",
            maybe_applied=True,
        )
    if connect_timeout is not None:
        return ConnectionLost(
            f"cannot reach Redis at {masked_url} (connect timeout {connect_timeout:g} s): {exc}"
        )
    return ConnectionLost(f"cannot reach Redis at {masked_url}: {exc}")


def wrap_error(exc: BaseException, masked_url: str) -> PgqueError:
    """Return the PgqueError to raise for a non-connection redis error *exc*: QueueMoving
    while the queue's slot moves (:func:`moving_error`), ConfigurationError for refused
    credentials, else PgqueError."""
    refusal = script_refusal(exc)
    if refusal is not None:
        return type(refusal)(f"Redis at {masked_url} refused the call: {refusal}")
    moving = moving_error(exc, masked_url)
    if moving is not None:
        return moving
    name = type(exc).__name__
    if name.startswith("Authentication"):
        return ConfigurationError(f"Redis at {masked_url} refused the credentials: {exc}")
    return PgqueError(f"Redis at {masked_url} failed: {name}: {exc}")


def leftover_options(url: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Return the *options* that are neither pgque's nor already in *url*'s query.

    ``connect()`` hands every query option to the opener; redis-py reads its own (``db``,
    ``ssl_cert_reqs``, ...) from the URL, so only the rest are unknown.
    """
    query = {key for key, _ in parse_qsl(urlsplit(url).query, keep_blank_values=True)}
    return {k: v for k, v in options.items() if k not in query}


def holder_arg(holders: Sequence[str | None]) -> str:
    """The holder argument of the claim scripts: one label for every lease ("" = none), or,
    when the labels differ, lease k's label as the k-th of NUL-separated labels (a holder
    never holds NUL)."""
    if not holders:
        return ""
    first = holders[0]
    if all(label == first for label in holders):
        return first or ""
    return "\0".join(label or "" for label in holders)
