"""The asyncio Redis driver: the connection (one server or a Redis Cluster), one Lua script call
per primitive with the retries that are safe, and pub/sub wake-ups."""

# The source of its blocking twin, _driver_sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import asyncio  # async-only
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import ClusterNode, ClusterPubSub, RedisCluster
from redis.asyncio.connection import parse_url
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AuthenticationError,
    ClusterDownError,
    MovedError,
    NoScriptError,
    RedisClusterException,
    RedisError,
    SlotNotCoveredError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from pgque.core.browse import (
    SCAN_ROWS,
    MessageInfo,
    MessagePage,
    MessagesQuery,
    message_info,
    message_row,
    prefix_end,
)
from pgque.core.connecting import Backoff, refused
from pgque.core.driver import GROUP_OPERATIONS, ClaimRequest, GroupCommand, Publication
from pgque.core.errors import ConfigurationError, PgqueError, TransportClosed
from pgque.core.history import HistoryQuery, HistorySetting
from pgque.core.live_workers import ALIVE_MULTIPLE, PRUNE_AFTER_S, WorkerBeat, encode_slots
from pgque.core.models import (
    DeadLetter,
    GroupInfo,
    GroupStateName,
    HistoryRecord,
    KeyInfo,
    KeyPolicy,
    Lease,
    QueueStats,
    ScheduledMessage,
    SettleResult,
    WorkerInfo,
)
from pgque.core.queue_model import OPERATOR_DROP_REASON
from pgque.core.stored import Undecodable, decode_policy, encode_policy, readable
from pgque.core.validation import CheckedSettlement, exhausted_reason
from pgque.core.wakeups import AsyncWakeupWaiter, DueWait
from pgque.redis._arguments import (
    GROUPS_SCAN_BUDGET,
    JOIN_BATCH,
    MAX_MESSAGE_ID,
    holder_arg,
    new_nonce,
    now_arg,
    score_after,
    script_flags,
    settlement_args,
)
from pgque.redis._backend import CAPABILITIES, ORIGIN
from pgque.redis._errors import (
    connection_lost,
    nothing_sent,
    raised_as_pgque,
    unreplicated,
    wrap_error,
)
from pgque.redis._history import decode_history, first_start, history_args, setting_args
from pgque.redis._keys import QUEUE_MARKER_PATTERNS, key_prefix, queue_of_marker, script_keys
from pgque.redis._options import MAX_RETRY_PAUSE, RedisOptions
from pgque.redis._replies import (
    DUE_MARGIN,
    decode_dead_letters,
    decode_group,
    decode_groups_page,
    decode_key_infos,
    decode_leases,
    decode_scheduled,
    decode_stats,
    decode_workers,
    due_in,
    text,
)
from pgque.redis._scripts import Script, load_scripts

__all__ = ["AsyncRedisDriver"]

log = logging.getLogger("pgque.redis")

#: Claim calls one claim makes at most when undecodable heads took places of its batch.
_CLAIM_ROUNDS = 4

#: How much one call of the purge script deletes at most (groups, messages, dead letters,
#: scheduled messages: one unit each). A script blocks Redis while it runs: one pass over a
#: queue of a million groups ran past the script time limit (every other client then got
#: BUSY), while a call of this budget takes tens of milliseconds.
PURGE_BUDGET = 1000

#: The scripts that create the queue's meta key whenever they succeed (a write that makes data).
_CREATES_META = frozenset({"publish", "publish_tick", "pause", "store_id", "heartbeat"})

#: The writing scripts that never wait for replicas: a claim lost in a failover only means
#: its messages are delivered again.
_NO_WAIT = frozenset({"claim"})

#: Redis Cluster errors that come before a command ran (the cluster is down, or a slot has no
#: node yet): safe to retry after a pause, as a connection that could not be opened.
_CLUSTER_NOT_RUN = (ClusterDownError, SlotNotCoveredError)

#: The read scripts whose answer may rightly be empty: they answer None while more scheduled
#: messages are due than one call joins (the others answer an empty reply then).
_EMPTY_IS_AN_ANSWER = frozenset({"group", "scheduled", "find_message"})

#: How many messages one call of the messages_page script examines at most: a kind search
#: over SCAN_ROWS messages is ten short scripts, never one that holds Redis for long.
BROWSE_SCAN_BUDGET = 1000


def _browsed(raw: Sequence[Any]) -> list[MessageInfo]:
    """The messages of a browse script's reply, 12 strings each (lua/lib/browse.lua): the
    preview cut by the script, or the whole stored text of an event of another shape, read
    here."""
    items: list[MessageInfo] = []
    for i in range(0, len(raw), 12):
        mid, gid, enq, head, att, size, due, form, *rest = raw[i : i + 12]
        if text(form) == "p":
            event_id, kind, preview, cut = rest
            row = [mid, readable(gid), readable(event_id), readable(kind), enq, text(due) or None]
            items.append(
                message_row(
                    [*row, text(head) == "1", att, size, readable(preview), text(cut) == "1"]
                )
            )
        else:
            items.append(
                message_info(
                    message_id=int(mid),
                    group_id=readable(gid),
                    event_json=readable(rest[0]),
                    enqueued_at=float(enq),
                    is_head=text(head) == "1",
                    attempts=int(att),
                    due_at=float(due) if text(due) else None,
                )
            )
    return items


def _policy_field(key: str | None) -> tuple[str, str]:
    """The key_policy script's arguments naming *key*'s policy (None: the default policy)."""
    return ("d", "") if key is None else ("k", key)


class AsyncRedisDriver:
    """One queue in one Redis database or Redis Cluster (asyncio API): each primitive of
    :class:`~pgque.core.AsyncDriver` is one script on the queue's keys. *client* is the
    caller's (never closed here), or None: made from the URL (a cluster's on first use).
    Raises ConfigurationError for options redis-py refuses, or ``wait_replicas`` with an
    injected cluster client."""

    backend = ORIGIN
    capabilities = CAPABILITIES

    def __init__(self, options: RedisOptions, client: Redis | RedisCluster | None) -> None:
        self.options = options
        self._owns_client = client is None
        self.cluster = options.cluster or isinstance(client, RedisCluster)
        if client is not None and self.cluster and options.wait_replicas:
            raise ConfigurationError(
                "wait_replicas needs a redis+cluster:// URL: a write waits for its replicas on "
                "a connection of the transport's own to the queue's node"
            )
        # The clients of single cluster nodes that writes waiting for replicas go through
        # (a write and its WAIT on one connection), by "host:port"; and their options.
        self._node_clients: dict[str, Redis] = {}
        self._node_options: dict[str, Any] = {}
        # A cluster URL's client is made on first use (_connected): the blocking RedisCluster
        # reads the slot map from the seeds as it is made.
        if client is None and not options.cluster:
            try:
                # The connect and the TLS handshake are bounded by socket_connect_timeout
                # (redis-py does a rediss:// handshake under it, asyncio and blocking alike);
                # a URL's own socket_connect_timeout wins (from_url). No socket_timeout: a
                # command (a WAIT, a long script) may rightly take longer than a connect.
                client = self._url_client(socket_connect_timeout=options.connect_timeout)
                # redis-py connects lazily; build one unconnected connection now so an unknown
                # URL option fails here rather than as a TypeError on first use.
                pool = client.connection_pool
                pool.connection_class(**pool.connection_kwargs)
            except (TypeError, ValueError) as exc:
                raise ConfigurationError(f"invalid Redis URL {options.masked_url}: {exc}") from exc
        self._client: Redis | RedisCluster | None = client
        self.queue = options.common.queue
        self.key_prefix = key_prefix(self.queue)
        self._keys = script_keys(self.key_prefix)
        # Set once the server answered a first PING (_reach): a first contact is bounded.
        self._reached = not self._owns_client or options.cluster
        # Set once this driver wrote to the queue (so its meta key exists): from then on a
        # node without the meta key is refused (lua/lib/refusals.lua).
        self._known = False
        #: Lease.origin of this queue's store, read on first need (open)
        self._origin: str | None = None
        self._closed = False
        self._scripts = load_scripts()
        # The claim arguments that never change: max_attempts ("" = unlimited), on_exhausted
        # and the reason of an exhausted head's dead letter.
        max_attempts = options.common.max_attempts
        self._exhaustion: tuple[str | int, str, str] = (
            "" if max_attempts is None else max_attempts,
            options.common.on_exhausted,
            "" if max_attempts is None else exhausted_reason(max_attempts),
        )
        # The subscriber side of wait_for_messages: one pub/sub connection, opened on first
        # use; the shared waiter lets one caller read it at a time and releases the others.
        self._pubsub: PubSub | None = None
        self._wakeups = AsyncWakeupWaiter(
            listening=lambda: self._pubsub is not None,
            listen=self._subscribe,
            heard=self._heard,
            drain=self._drain_wakes,
            reset=self._drop_pubsub,
        )
        self._due = DueWait(DUE_MARGIN)

    # -- connections ---------------------------------------------------------------------

    def _url_client(self, **timeouts: Any) -> Redis:
        """Make a client of the URL with redis-py's retries off: pgque retries by itself,
        knowing which operations are safe to repeat."""
        url = self.options.url or ""
        return Redis.from_url(url, retry=Retry(NoBackoff(), 0), retry_on_error=[], **timeouts)

    @property
    def client(self) -> Redis | RedisCluster:
        """The redis-py client (a cluster URL's is made on first use: ConfigurationError for
        options redis-py refuses)."""
        return self._cluster_client() if self._client is None else self._client

    def _cluster_client(self) -> RedisCluster:
        """Make the cluster client of a ``redis+cluster://`` URL, its own retries off: this
        driver retries only what cannot have run."""
        # redis-py's blocking cluster module has no type hints: its calls go through Any.
        node_class: Any = ClusterNode
        seeds = [node_class(host, port) for host, port in self.options.seeds[1:]]
        try:
            # Not RedisCluster.from_url: the node clients it makes keep their connections
            # open after close() (their pools are not theirs to close).
            parse: Any = parse_url  # untyped in redis-py's blocking module
            options: dict[str, Any] = dict(parse(self.options.url or ""))
            options.pop("db", None)  # a cluster has only database 0 (checked by the URL)
            if "SSL" in getattr(options.pop("connection_class", None), "__name__", ""):
                options["ssl"] = True
            options.setdefault("socket_connect_timeout", self.options.connect_timeout)
            client = RedisCluster(startup_nodes=seeds, retry=Retry(NoBackoff(), 0), **options)
            self._node_options = {k: v for k, v in options.items() if k not in {"host", "port"}}
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(
                f"invalid Redis Cluster URL {self.options.masked_url}: {exc}"
            ) from exc
        self._client = client
        return client

    async def _reach(self) -> None:
        """PING the server of a URL on a connection whose every wait (connect, TLS handshake,
        reply) is bounded by ``connect_timeout``: the driver's own client bounds only its
        connect (a command may rightly take long), so a server that never answers would hold
        its first command forever. Raises redis-py's connection or timeout error."""
        seconds = self.options.connect_timeout
        probe = self._url_client(socket_connect_timeout=seconds, socket_timeout=seconds)
        try:
            await probe.ping()
        finally:
            with contextlib.suppress(RedisError):
                await probe.aclose()
        self._reached = True

    async def _connected(self) -> Redis | RedisCluster:
        """Return the client, a cluster client made and its slot map read (the server of a
        URL reached first: :meth:`_reach`)."""
        if not self._reached:
            await self._reach()
        client = self.client
        if isinstance(client, RedisCluster):  # async-only
            await client.initialize()  # async-only
        return client

    def _node_client(self, host: str, port: int) -> Redis:
        """Return this driver's own client of the cluster node at *host*:*port*."""
        name = f"{host}:{port}"
        if name not in self._node_clients:
            self._node_clients[name] = Redis(
                host=host,
                port=port,
                retry=Retry(NoBackoff(), 0),
                retry_on_error=[],
                **self._node_options,
            )
        return self._node_clients[name]

    async def _send(
        self,
        client: Redis | RedisCluster,
        script: Script,
        by_sha: bool,
        args: list[Any],
        waits: bool,
    ) -> Any:
        """Send *script* (EVALSHA by its SHA, else EVAL of its text) with *args*; return its
        reply. On a cluster it goes to the node of the queue's slot, which redis-py never
        retries. When *waits*, the script and a ``WAIT`` for ``wait_replicas`` go on one
        connection, and fewer confirmations within ``wait_timeout`` raise ConnectionLost
        (``maybe_applied``); any other failure is redis-py's error (MOVED, NOSCRIPT, ...)."""
        command = ("EVALSHA", script.sha) if by_sha else ("EVAL", script.text)
        node: Any = None
        if isinstance(client, RedisCluster):
            cluster: Any = client  # the blocking cluster client has no type hints
            node = cluster.get_node_from_key(self._keys[0])
            if not waits:
                return await cluster.execute_command(*command, *args, target_nodes=node)
        elif not waits:
            send = client.evalsha if by_sha else client.eval
            return await send(command[1], *args)
        target = client if node is None else self._node_client(node.host, node.port)
        pipe: Any = target.pipeline(transaction=False)  # blocking pipelines are untyped
        pipe.execute_command(*command, *args)
        millis = max(1, round(self.options.wait_timeout * 1000))
        pipe.execute_command("WAIT", self.options.wait_replicas, millis)
        reply, acked = await pipe.execute(raise_on_error=False)
        if isinstance(reply, BaseException):
            raise reply
        failed = unreplicated(acked, self.options)
        if failed is not None:
            raise failed
        return reply

    async def _refresh_slots(self, client: Redis | RedisCluster) -> None:
        """Read the cluster's slot map again (after a failover or a MOVED); never raises."""
        if isinstance(client, RedisCluster):
            cluster: Any = client
            with contextlib.suppress(RedisError, RedisClusterException):
                await cluster.nodes_manager.initialize()

    async def _run(
        self, name: str, now: float | None, *args: str | int | bytes, repeatable: bool = False
    ) -> Any:
        """Run script *name* on this queue's keys at *now* (None: the server's ``TIME``) and
        return its reply (see :meth:`run_script`)."""
        return await self.run_script(
            self._scripts[name],
            [now_arg(now), *args],
            repeatable=repeatable,
            creates_meta=name in _CREATES_META,
        )

    async def run_script(
        self,
        script: Script,
        args: Sequence[str | int | bytes],
        *,
        repeatable: bool = False,
        creates_meta: bool = False,
    ) -> Any:
        """Run *script* on this queue's keys with *args* (its "now" first); return its reply.

        A connection not opened is retried with a bounded doubling pause; one lost after the
        command was sent only when *repeatable*. A script that *creates_meta* makes the queue
        known once it succeeded (lua/lib/store.lua). Raises TransportClosed, ConnectionLost
        (QueueMoving while the queue's slot moves), ConfigurationError (credentials) or
        PgqueError.
        """
        if self._closed:
            raise TransportClosed()
        full = [2, *self._keys, script_flags(self._known, self.cluster), *args]
        # A write waits for its replicas (WAIT); a read has nothing to wait for (_NO_WAIT).
        waits = bool(self.options.wait_replicas) and not repeatable and script.name not in _NO_WAIT
        client: Redis | RedisCluster | None = None
        # Reaching the server (retries included) gives up at the connect timeout.
        retrying = Backoff(
            self.options.connect_timeout,
            self.options.retry_backoff,
            MAX_RETRY_PAUSE,
            self.options.retries,
        )
        masked = self.options.masked_url
        while True:
            reaching = True
            try:
                client = await self._connected()
                reaching = False
                try:
                    reply = await self._send(client, script, True, full, waits)
                except NoScriptError:
                    # SCRIPT FLUSH or a restarted server forgot it; nothing ran. EVAL sends the
                    # text (and caches it again) in the same call, so no flush can come between
                    # a reload and the rerun.
                    reply = await self._send(client, script, False, full, waits)
                if creates_meta:
                    self._known = True
                return reply
            except AuthenticationError as exc:
                raise wrap_error(exc, masked) from exc
            except (RedisConnectionError, RedisTimeoutError) as exc:
                sent = not reaching and not nothing_sent(exc)
                final = not self.options.retry_refused and refused(exc)
                if final or retrying.late() or retrying.spent() or (sent and not repeatable):
                    raise connection_lost(exc, masked, sent, self.options.connect_timeout) from exc
                if client is not None:
                    await self._refresh_slots(client)  # a failover may have moved the slot
            except MovedError as exc:
                # Only a write waiting for replicas sees MOVED (redis-py follows it otherwise):
                # the slot's node changed and the script did not run.
                if retrying.spent() or client is None:
                    raise wrap_error(exc, masked) from exc
                await self._refresh_slots(client)
            except (*_CLUSTER_NOT_RUN, RedisClusterException) as exc:
                # The cluster is down or reshaping (a failover), or no seed answered: the
                # script did not run, so it is retried like a connection not opened.
                if not isinstance(exc, _CLUSTER_NOT_RUN) and "cannot be connected" not in str(exc):
                    raise wrap_error(exc, masked) from exc
                if retrying.spent() or retrying.late():
                    raise connection_lost(exc, masked, False, self.options.connect_timeout) from exc
            except RedisError as exc:
                raise wrap_error(exc, masked) from exc
            await asyncio.sleep(retrying.pause())

    async def open(self) -> str:
        """Return ``Lease.origin``: ``redis:<meta key value>`` (read once; the script writes
        the meta key of a new queue)."""
        if self._origin is None:
            identity = await self._run("store_id", None, repeatable=True)
            self._origin = f"{ORIGIN}:{text(identity)}"
        return self._origin

    def _later(self, now: float | None) -> float | None:
        """The time of a later script call of one operation: the injected clock read again
        (a script on the server reads ``TIME`` anew, None)."""
        clock = self.options.common.clock
        return None if now is None or clock is None else float(clock())

    # -- publishing ----------------------------------------------------------------------

    async def publish(
        self, items: Sequence[Publication], priority: int, delay: float, now: float | None
    ) -> list[int]:
        args: list[str | int] = [priority, repr(delay)]
        for item in items:
            args += [item.group_id, item.text, item.fairness_key or ""]
        return [int(v) for v in await self._run("publish", now, *args)]

    async def cancel(self, message_id: int, now: float | None) -> bool:
        if message_id >= MAX_MESSAGE_ID:  # never a message id
            return False
        return bool(int(await self._run("cancel", now, message_id)))

    async def scheduled(
        self, limit: int, after: int | None, now: float | None
    ) -> list[ScheduledMessage]:
        start = score_after(after, 0)
        return decode_scheduled(await self._joined("scheduled", now, limit, start))

    async def publish_tick(
        self, entry: str, tick: float, item: Publication, priority: int, now: float | None
    ) -> int | None:
        reply = await self._run(
            "publish_tick",
            now,
            entry,
            repr(tick),
            priority,
            item.group_id,
            item.text,
            item.fairness_key or "",
        )
        return None if reply is None else int(reply)

    async def last_tick(self, entry: str) -> float | None:
        reply = await self._run("last_tick", None, entry, repeatable=True)
        return None if reply is None else float(text(reply))

    async def server_time(self) -> float:
        """The Redis server's ``TIME``, epoch seconds."""
        seconds, micros = await self._run("server_time", None, repeatable=True)
        return int(seconds) + int(micros) / 1_000_000

    # -- claiming and settling -----------------------------------------------------------

    async def settle_and_claim(
        self, settlements: Sequence[CheckedSettlement], claim: ClaimRequest, now: float | None
    ) -> SettleResult:
        leases: list[Lease] = []
        if not settlements:
            await self._claim_rounds(_CLAIM_ROUNDS, claim, now, leases, [])
            return SettleResult([], leases)
        if not claim.n and all(item.outcome == "ack" for item in settlements):
            # The common calls have lighter scripts of their own, with the same effect.
            fences = [a for item in settlements for a in settlement_args(item)[:3]]
            return SettleResult([bool(int(v)) for v in await self._run("ack", now, *fences)], [])
        if not claim.n and len(settlements) == 1:
            (item,) = settlements
            reply = await self._run(item.outcome, now, *settlement_args(item))
            return SettleResult([bool(int(reply))], [])
        args = self._claim_args(claim, claim.n, claim.holders)
        for item in settlements:
            args += [item.outcome, *settlement_args(item)]
        reply = await self._run("settle_claim", now, *args)
        count = len(settlements)
        bad_groups: list[str | bytes] = []
        if await self._take_leases(reply[count:], leases, bad_groups, now):
            await self._claim_rounds(_CLAIM_ROUNDS - 1, claim, self._later(now), leases, bad_groups)
        return SettleResult([bool(int(v)) for v in reply[:count]], leases)

    def _claim_args(
        self, claim: ClaimRequest, n: int, holders: Sequence[str | None]
    ) -> list[str | int | bytes]:
        """Return the claim script's arguments after "now" up to its holder (claim.lua,
        settle_claim.lua)."""
        return [
            repr(claim.visibility),
            claim.min_priority,
            n,
            *self._exhaustion,
            new_nonce(),
            holder_arg(holders),
        ]

    async def _claim_rounds(
        self,
        rounds: int,
        claim: ClaimRequest,
        now: float | None,
        leases: list[Lease],
        bad_groups: list[str | bytes],
    ) -> None:
        """Claim into *leases* until it holds ``claim.n``, in at most *rounds* claim calls.

        A call runs again only for the places heads that did not decode took (JSON that is not
        an Event; the script buries text that is not JSON). Later calls skip the groups leased
        so far and *bad_groups*: a lease that expired meanwhile is neither leased twice nor
        spent as an attempt, buried or blocked behind the caller's back.
        """
        for _ in range(rounds):
            if len(leases) >= claim.n:
                return
            args = self._claim_args(claim, claim.n - len(leases), claim.holders[len(leases) :])
            if bad_groups:
                args += [lease.group_id for lease in leases]
                args += bad_groups
            reply = await self._run("claim", now, *args)
            if not await self._take_leases(reply, leases, bad_groups, now):
                return
            now = self._later(now)

    async def _take_leases(
        self,
        reply: Sequence[Any],
        leases: list[Lease],
        bad_groups: list[str | bytes],
        now: float | None,
    ) -> bool:
        """Decode a claim reply into *leases*; dead-letter each head that did not decode and
        add its group to *bad_groups*. Returns whether any head did not decode."""
        good, bad = decode_leases(reply, self.queue, await self.open())
        leases += good
        for item in bad:
            bad_groups.append(item.group_id)
            await self._bury_undecodable(item, self._later(now))
        return bool(bad)

    async def _bury_undecodable(self, item: Undecodable, now: float | None) -> None:
        """Dead-letter an undecodable head through its own lease; if that fails the lease is
        left to expire and the next claim of its group tries again."""
        fence = (item.group_id, item.token, item.message_id)
        try:
            await self._run("dead_letter", now, *fence, item.reason, "", "")
        except PgqueError as exc:
            log.warning("could not dead-letter an undecodable message: %s", exc)
            return
        log.warning("dead-lettered an undecodable message of queue %s: %s", self.queue, item.reason)

    async def extend(self, lease: Lease, visibility: float, now: float | None) -> float | None:
        fence = (lease.group_id, lease.token, lease.message_id)
        reply = await self._run("extend", now, *fence, repr(visibility))
        return None if reply is None else float(text(reply))

    # -- dead letters --------------------------------------------------------------------

    async def dead_letters(self, limit: int, after: int | None) -> list[DeadLetter]:
        start = score_after(after, -MAX_MESSAGE_ID)
        reply = await self._run("dead_letters", None, limit, start, repeatable=True)
        return decode_dead_letters(reply)

    async def redrive(
        self, ids: list[int] | None, in_place: bool, retry_now: bool, now: float | None
    ) -> int:
        flags = (
            "all" if ids is None else "ids",
            "1" if in_place else "0",
            "1" if retry_now else "0",
        )
        return int(await self._run("redrive", now, *flags, *sorted(set(ids or []))))

    async def delete_dead_letters(self, ids: list[int]) -> int:
        if not ids:
            return 0
        return int(await self._run("delete_dead_letters", None, *sorted(set(ids))))

    # -- groups --------------------------------------------------------------------------

    async def command(
        self, group_id: str, command: GroupCommand, head: int | None, now: float | None
    ) -> bool:
        script, drop = GROUP_OPERATIONS[command]
        args: list[str] = []
        if drop is not None:  # unblock.lua: whether to drop, the dead letter's reason, the head
            args = ["1" if drop else "0", OPERATOR_DROP_REASON, "" if head is None else str(head)]
        return bool(int(await self._run(script, now, group_id, *args)))

    async def _joined(self, name: str, now: float | None, *args: str | int | bytes) -> Any:
        """Run the read script *name* once every due scheduled message has joined its group.

        The script joins up to a thousand itself; with more due it answers None (or an empty
        reply, :data:`_EMPTY_IS_AN_ANSWER`), and join_due calls of :data:`JOIN_BATCH` each (a
        backlog never holds Redis for long) join them before it runs again.
        """
        while True:
            reply = await self._run(name, now, *args, repeatable=True)
            if reply is not None and (reply or name in _EMPTY_IS_AN_ANSWER):
                return reply
            while int(await self._run("join_due", now, JOIN_BATCH, repeatable=True)) >= JOIN_BATCH:
                pass

    async def group(self, group_id: str, now: float | None) -> GroupInfo | None:
        return decode_group(await self._joined("group", now, group_id))

    async def groups(
        self,
        state: GroupStateName | None,
        limit: int,
        after: str | None,
        now: float | None,
        prefix: str | None = None,
    ) -> list[GroupInfo]:
        # Paused and blocked groups have indexes of their own; other states are filtered. A
        # prefix is a lexicographic range of the index: from the prefix (or after *after*
        # inside it) to the prefix's end, the script's stop bound.
        if prefix is None:
            return await self._group_pages(
                "groups", state, limit, ("-" if after is None else "(" + after,), now
            )
        start = "(" + after if after is not None else "[" + prefix
        if after is not None and after.encode("utf-8") < prefix.encode("utf-8"):
            start = "[" + prefix
        end = prefix_end(prefix)
        stop = "+" if end is None else "(" + end
        return await self._group_pages("groups", state, limit, (start,), now, (stop,))

    async def oldest_groups(
        self, state: GroupStateName | None, limit: int, now: float | None
    ) -> list[GroupInfo]:
        # Groups in a sorted set scored by their head's enqueue time (<key prefix>heads); a call
        # also indexes as many groups of a queue written before that set existed.
        return await self._group_pages("oldest_groups", state, limit, ("", ""), now)

    async def _group_pages(
        self,
        name: str,
        state: GroupStateName | None,
        limit: int,
        cursor: tuple[str | bytes, ...],
        now: float | None,
        tail: tuple[str, ...] = (),
    ) -> list[GroupInfo]:
        """Fill a page by calls of the script *name* that each examine at most
        GROUPS_SCAN_BUDGET groups, each going on after the last group the one before examined:
        *cursor* is the groups script's id (``(`` before it) or oldest_groups' (score, id);
        *tail* goes after the budget (the groups script's stop bound)."""
        page: list[GroupInfo] = []
        while True:
            args = (state or "", limit - len(page), *cursor, GROUPS_SCAN_BUDGET, *tail)
            reply = await self._joined(name, now, *args)
            # The reply: whether the index ended, the cursor's fields, then the groups.
            ended, last, infos = decode_groups_page([reply[0], *reply[len(cursor) :]])
            page += infos
            if ended or last is None or len(page) >= limit:
                return page
            if name == "groups":
                cursor = (b"(" + last if isinstance(last, bytes) else "(" + last,)
            else:
                cursor = (reply[1], last)

    async def stats(self, now: float | None) -> QueueStats:
        return decode_stats(await self._joined("stats", now))

    async def queues(self) -> list[str]:
        """A SCAN of the keyspace (incremental: Redis serves other clients meanwhile)."""
        names: set[str] = set()
        with raised_as_pgque(self.options.masked_url, sent=False):
            client = await self._connected()
            for pattern in QUEUE_MARKER_PATTERNS:
                async for key in client.scan_iter(match=pattern, count=1000):
                    name = queue_of_marker(text(key))
                    if name is not None:
                        names.add(name)
        return sorted(names, key=lambda name: name.encode("utf-8"))

    async def purge(self, budget: int = PURGE_BUDGET) -> None:
        """Empty the queue in calls of the purge script that delete at most *budget* items
        each (lua/purge.lua), until one finds nothing left."""
        while not int(await self._run("purge", None, budget)):
            pass

    # -- fairness keys -------------------------------------------------------------------

    async def heartbeat(self, beat: WorkerBeat, now: float | None) -> None:
        await self._run(
            "heartbeat",
            now,
            beat.id,
            beat.holder,
            beat.host,
            str(beat.pid),
            beat.version,
            str(beat.concurrency),
            repr(beat.heartbeat_every),
            encode_slots(beat),
            repr(PRUNE_AFTER_S),
        )

    async def goodbye(self, worker: str) -> bool:
        return bool(await self._run("goodbye", None, worker))

    async def workers(self, include_gone: bool, now: float | None) -> list[WorkerInfo]:
        reply = await self._run("workers", now, "1" if include_gone else "0", repr(ALIVE_MULTIPLE))
        return decode_workers(reply, self.queue)

    async def set_key_policy(self, key: str | None, policy: KeyPolicy) -> None:
        await self._run("key_policy", None, "set", *_policy_field(key), encode_policy(policy))

    async def key_policy(self, key: str | None) -> KeyPolicy | None:
        reply = await self._run("key_policy", None, "get", *_policy_field(key), repeatable=True)
        return decode_policy(reply)

    async def delete_key_policy(self, key: str | None) -> bool:
        return bool(int(await self._run("key_policy", None, "delete", *_policy_field(key))))

    async def key_info(self, key: str, now: float | None) -> KeyInfo | None:
        infos = decode_key_infos(await self._joined("key_infos", now, "one", key))
        return infos[0] if infos else None

    async def keys(self, limit: int, after: str | None, now: float | None) -> list[KeyInfo]:
        start = "-" if after is None else "(" + after
        return decode_key_infos(await self._joined("key_infos", now, "page", limit, start))

    # -- job history ---------------------------------------------------------------------

    async def set_history(self, setting: HistorySetting) -> None:
        await self._run("set_history", None, *setting_args(setting))

    async def history(self, query: HistoryQuery, now: float | None) -> list[HistoryRecord]:
        """Fill a page by calls of the history script that each examine at most
        HISTORY_SCAN_BUDGET records of the queue's stream, each going on where the one before
        stopped (a message's story is read through its index in one call)."""
        records: list[HistoryRecord] = []
        start: str | None = first_start(query)
        while start is not None and len(records) < query.limit:
            args = history_args(query, start, query.limit - len(records))
            start, page = decode_history(await self._run("history", now, *args, repeatable=True))
            records += page
        return records

    # -- browse and search (lua/lib/browse.lua; pgque.core.browse) -----------------------

    async def messages(self, query: MessagesQuery, now: float | None) -> MessagePage:
        """Fill a page by calls of the messages_page script that each examine at most
        BROWSE_SCAN_BUDGET messages, each going on where the one before stopped, until the
        page is full, nothing is left, or SCAN_ROWS messages were examined."""
        # A cursor is a place in a group or a message id, both scores below MAX_MESSAGE_ID.
        after = "" if query.after is None else str(min(query.after, MAX_MESSAGE_ID))
        items: list[MessageInfo] = []
        left = SCAN_ROWS
        while True:
            budget = min(BROWSE_SCAN_BUDGET, left)
            args = (query.group_id or "", query.kind or "", query.limit - len(items), after)
            reply = await self._joined("messages_page", now, *args, budget)
            after, left = text(reply[0]), left - int(reply[1])
            items += _browsed(reply[2:])
            if not after or len(items) >= query.limit or left <= 0:
                next_after = int(float(after)) if after else None
                return MessagePage(items=items, next_after=next_after)

    async def message(self, message_id: int, now: float | None) -> MessageInfo | None:
        if message_id >= MAX_MESSAGE_ID:  # never a message id
            return None
        found = _browsed(await self._joined("find_message", now, message_id))
        return found[0] if found else None

    async def group_scheduled(
        self, group_id: str, limit: int, after: int | None, now: float | None
    ) -> list[ScheduledMessage]:
        start = score_after(after, 0)
        return decode_scheduled(await self._joined("scheduled", now, limit, start, group_id))

    # -- wake-ups ------------------------------------------------------------------------

    async def wait_for_messages(self, timeout: float, now: float | None) -> bool:
        """Wait on the queue's wake channel (``<key prefix>wake``), never past the next
        scheduled message's due time (read first; then True)."""
        reply = await self._run("next_due", now, repeatable=True)
        due = self._due.cap(timeout, due_in(reply))
        with raised_as_pgque(self.options.masked_url, sent=True):
            return await self._wakeups.wait(timeout, due)

    async def _subscribe(self) -> bool:
        client = await self._connected()
        channel = self.key_prefix + "wake"
        if isinstance(client, RedisCluster):
            # Sharded pub/sub: the channel hashes to the queue's slot, so the subscription is
            # on the node that runs the queue's scripts (they SPUBLISH).
            cluster: Any = client  # the blocking cluster client has no type hints
            pubsub = cluster.pubsub(ignore_subscribe_messages=True)
            if not hasattr(pubsub, "ssubscribe"):  # pragma: no cover - an old redis-py
                raise ConfigurationError(
                    "wake-ups on a Redis Cluster need a redis-py with sharded pub/sub "
                    "(ClusterPubSub.ssubscribe): upgrade the redis package"
                )
            # Kept before subscribing, so a failed or cancelled subscribe can be dropped.
            self._pubsub = pubsub
            await pubsub.ssubscribe(channel)
        else:
            self._pubsub = PubSub(client.connection_pool, ignore_subscribe_messages=True)
            await self._pubsub.subscribe(channel)
        return True

    async def _note(self, pubsub: PubSub, timeout: float) -> Any:
        if isinstance(pubsub, ClusterPubSub):
            sharded: Any = pubsub  # the blocking cluster client has no type hints
            return await sharded.get_sharded_message(
                ignore_subscribe_messages=True, timeout=timeout
            )
        return await pubsub.get_message(ignore_subscribe_messages=True, timeout=timeout)

    async def _heard(self, timeout: float) -> bool:
        pubsub = self._pubsub
        if pubsub is None:  # pragma: no cover - the waiter subscribes first
            return False
        deadline = time.monotonic() + timeout
        while True:
            note = await self._note(pubsub, max(0.0, deadline - time.monotonic()))
            if note is not None:
                return True
            if time.monotonic() >= deadline:
                return False

    async def _drain_wakes(self) -> None:
        pubsub = self._pubsub
        while pubsub is not None and await self._note(pubsub, 0.0):
            pass

    async def _drop_pubsub(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            with contextlib.suppress(RedisError):  # closing a broken connection
                await pubsub.aclose()  # async-only
                # sync: pubsub.close()

    async def close(self) -> None:
        """Close the connections this driver opened (not an injected client)."""
        if self._closed:
            return
        self._closed = True
        await self._drop_pubsub()
        for node_client in self._node_clients.values():
            with contextlib.suppress(RedisError):
                await node_client.aclose()
        if self._owns_client and self._client is not None:
            # Closing a broken connection must not fail the caller.
            with contextlib.suppress(RedisError, RedisClusterException):
                await self._client.aclose()
