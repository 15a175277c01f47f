"""The asyncio Redis transport: every operation is one atomic Lua script call."""

# This file is the source of its blocking twin, _sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import asyncio  # async-only
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
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

from pgque.core.contract import ErrorLike
from pgque.core.errors import ConfigurationError, InvalidInput, PgqueError, TransportClosed
from pgque.core.models import (
    DeadLetter,
    Event,
    GroupInfo,
    GroupStateName,
    Lease,
    QueueStats,
    ScheduledMessage,
    Settlement,
    SettleResult,
)
from pgque.core.queue_model import OPERATOR_DROP_REASON
from pgque.core.tracing import traced_publish
from pgque.core.transport_base import TransportBase
from pgque.core.validation import (
    OnExhausted,
    check_after_id,
    check_backend,
    check_batch_size,
    check_claim_count,
    check_delay,
    check_entry_name,
    check_group_id,
    check_groups_page,
    check_head,
    check_holder,
    check_holders,
    check_ids,
    check_lease,
    check_limit,
    check_message_id,
    check_oldest_groups,
    check_priority,
    check_reason,
    check_scheduled_page,
    check_seconds,
    check_settlements,
    check_store,
    check_tick,
    exhausted_reason,
)
from pgque.core.wakeups import AsyncWakeupWaiter
from pgque.redis._arguments import (
    GROUPS_SCAN_BUDGET,
    JOIN_BATCH,
    MAX_MESSAGE_ID,
    dead_letter_after,
    error_args,
    holder_arg,
    new_nonce,
    now_arg,
    scheduled_after,
    script_flags,
    settlement_args,
)
from pgque.redis._backend import CAPABILITIES, ORIGIN
from pgque.redis._errors import (
    connection_lost,
    nothing_sent,
    refused,
    unreplicated,
    wrap_error,
)
from pgque.redis._keys import QUEUE_MARKER_PATTERNS, key_prefix, queue_of_marker, script_keys
from pgque.redis._options import MAX_RETRY_PAUSE, NOT_GIVEN, NotGiven, resolve_options
from pgque.redis._replies import (
    Undecodable,
    decode_dead_letters,
    decode_group,
    decode_groups_page,
    decode_leases,
    decode_scheduled,
    decode_stats,
    text,
    wait_cap,
)
from pgque.redis._scripts import Script, load_scripts

# sync: import threading

__all__ = ["AsyncRedisTransport"]

log = logging.getLogger("pgque.redis")

#: Claim calls one claim_many makes at most when undecodable heads took places of its batch.
_CLAIM_ROUNDS = 4

#: The scripts that create the queue's meta key whenever they succeed (a write that makes data).
_CREATES_META = frozenset({"publish", "publish_tick", "pause", "store_id"})

#: The writing scripts that never wait for replicas: a claim lost in a failover only means
#: its messages are delivered again.
_NO_WAIT = frozenset({"claim"})

#: Redis Cluster errors that come before a command ran (the cluster is down, or a slot has no
#: node yet): safe to retry after a pause, as a connection that could not be opened.
_CLUSTER_NOT_RUN = (ClusterDownError, SlotNotCoveredError)


class AsyncRedisTransport(TransportBase):
    """A per-group FIFO queue in Redis (asyncio API).

    Give a URL (``redis://``, ``rediss://`` for TLS, ``unix://``; ``redis+cluster://host:port,
    host:port/`` or ``rediss+cluster://`` for a Redis Cluster, naming seed nodes) or an
    injected ``client`` (``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster``; it
    stays yours to close). pgque's options may come from the URL's
    query (``?queue=orders&max_attempts=5&on_exhausted=block&retries=5&retry_backoff=0.05``,
    ``max_event_bytes`` to cap an event's JSON size, default 8 MiB);
    keyword arguments win over them, and the remaining query options go to redis-py.
    ``max_attempts`` defaults to 10 (:data:`~pgque.core.validation.DEFAULT_MAX_ATTEMPTS`);
    ``None`` (``max_attempts=none`` in a URL) is unlimited.

    Every operation is one Lua script, so it is atomic and takes one round trip (a
    :meth:`groups` page of the ready, leased or parked state takes one per 500 groups it
    passes over, see there; :meth:`stats`, :meth:`groups` and :meth:`scheduled` take one more
    per thousand due scheduled messages beyond the first thousand, see there;
    :meth:`wait_for_messages` first reads the next due time). Time comes from the server
    (``TIME``) unless ``clock`` is given (tests only). A failure to connect is retried
    ``retries`` times with a doubling pause from ``retry_backoff`` seconds, then raised
    as ConnectionLost (at once for a refused connection with ``retry_refused=False``, for
    one-shot tools); so is a connection lost mid-command for reads, while a write whose
    outcome is unknown raises ConnectionLost at once rather than risk applying it twice.

    On a Redis Cluster every script is sent to the node of the queue's slot with the client's
    own retries off (MOVED and ASK redirects are followed; a script is never resent after it
    may have run), wake-ups use sharded pub/sub, and a call the cluster refuses while the
    queue's slot migrates raises QueueMoving (nothing changed). Every write but a claim waits for
    ``wait_replicas`` replicas (``WAIT``, up to ``wait_timeout`` seconds; default 1 replica on a
    cluster URL, else 0) and raises ConnectionLost (``maybe_applied``) when fewer confirm it.

    Raises ConfigurationError for a bad URL or option, InvalidInput for a bad queue name,
    ``max_attempts`` or ``on_exhausted``.
    """

    # Not durable: that depends on Redis's AOF settings (see CAPABILITIES).
    CAPABILITIES = CAPABILITIES

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Redis | RedisCluster | None = None,
        queue: str | None = None,
        max_attempts: int | NotGiven | None = NOT_GIVEN,
        on_exhausted: OnExhausted | None = None,
        clock: Callable[[], float] | None = None,
        retries: int | None = None,
        retry_backoff: float | None = None,
        max_event_bytes: int | None = None,
        retry_refused: bool | None = None,
        wait_replicas: int | None = None,
        wait_timeout: float | None = None,
        connect_timeout: float | None = None,
    ) -> None:
        self._options = resolve_options(
            url,
            has_client=client is not None,
            queue=queue,
            max_attempts=max_attempts,
            on_exhausted=on_exhausted,
            clock=clock,
            retries=retries,
            retry_backoff=retry_backoff,
            max_event_bytes=max_event_bytes,
            retry_refused=retry_refused,
            wait_replicas=wait_replicas,
            wait_timeout=wait_timeout,
            connect_timeout=connect_timeout,
        )
        TransportBase.__init__(self, self._options.common)
        self._owns_client = client is None
        self._cluster = self._options.cluster or isinstance(client, RedisCluster)
        if client is not None and self._cluster and self._options.wait_replicas:
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
        if client is None and not self._options.cluster:
            try:
                # pgque retries by itself, knowing which operations are safe to repeat.
                # The connect and the TLS handshake are bounded by socket_connect_timeout
                # (redis-py does a rediss:// handshake under it, asyncio and blocking alike);
                # a URL's own socket_connect_timeout wins (from_url). No socket_timeout: a
                # command (a WAIT, a long script) may rightly take longer than a connect.
                client = Redis.from_url(
                    self._options.url or "",
                    retry=Retry(NoBackoff(), 0),
                    retry_on_error=[],
                    socket_connect_timeout=self._options.connect_timeout,
                )
                # redis-py connects lazily; build one unconnected connection now so an unknown
                # URL option fails here rather than as a TypeError on first use.
                pool = client.connection_pool
                pool.connection_class(**pool.connection_kwargs)
            except (TypeError, ValueError) as exc:
                raise ConfigurationError(
                    f"invalid Redis URL {self._options.masked_url}: {exc}"
                ) from exc
        self._client: Redis | RedisCluster | None = client
        self._prefix = key_prefix(self._options.common.queue)
        self._keys = script_keys(self._prefix)
        # Set once the server answered a first PING (_reach): a first contact is bounded.
        self._reached = not self._owns_client or self._options.cluster
        # Set once this transport wrote to the queue (so its meta key exists): from then on a
        # node without the meta key is refused (lua/lib/refusals.lua).
        self._known = False
        #: Lease.origin of this queue's store, read on first need (_store_origin)
        self._origin: str | None = None
        self._scripts = load_scripts()
        # The claim arguments that never change: max_attempts ("" = unlimited), on_exhausted
        # and the reason of an exhausted head's dead letter.
        max_attempts = self._options.common.max_attempts
        self._exhaustion: tuple[str | int, str, str] = (
            "" if max_attempts is None else max_attempts,
            self._options.common.on_exhausted,
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

    def _repr_fields(self) -> list[str]:
        return [repr(self._options.masked_url), f"queue={self.queue!r}"]

    @property
    def key_prefix(self) -> str:
        """The prefix of every key of this queue, ``{pgque:<queue>}:`` (one Cluster slot)."""
        return self._prefix

    @property
    def client(self) -> Redis | RedisCluster:
        """The redis-py client this transport uses (for a cluster URL, made on first use).

        Raises ConfigurationError for options redis-py refuses.
        """
        return self._cluster_client() if self._client is None else self._client

    @property
    def cluster(self) -> bool:
        """Whether this transport talks to a Redis Cluster (a cluster URL or client)."""
        return self._cluster

    def _cluster_client(self) -> RedisCluster:
        """Make the cluster client of a ``redis+cluster://`` URL.

        Its own retries are off (``retry=Retry(NoBackoff(), 0)``): this transport retries only
        what cannot have run. Raises ConfigurationError for options redis-py refuses.
        """
        # redis-py's blocking cluster module has no type hints: its calls go through Any.
        node_class: Any = ClusterNode
        seeds = [node_class(host, port) for host, port in self._options.seeds[1:]]
        try:
            # Not RedisCluster.from_url: the node clients it makes keep their connections
            # open after close() (their pools are not theirs to close).
            parse: Any = parse_url  # untyped in redis-py's blocking module
            options: dict[str, Any] = dict(parse(self._options.url or ""))
            options.pop("db", None)  # a cluster has only database 0 (checked by the URL)
            if "SSL" in getattr(options.pop("connection_class", None), "__name__", ""):
                options["ssl"] = True
            options.setdefault("socket_connect_timeout", self._options.connect_timeout)
            client = RedisCluster(startup_nodes=seeds, retry=Retry(NoBackoff(), 0), **options)
            self._node_options = {k: v for k, v in options.items() if k not in {"host", "port"}}
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(
                f"invalid Redis Cluster URL {self._options.masked_url}: {exc}"
            ) from exc
        self._client = client
        return client

    async def _reach(self) -> None:
        """First contact with the server of a URL: PING it on a connection of its own whose
        every wait (connect, TLS handshake, reply) is bounded by ``connect_timeout``.

        The transport's own client bounds only its connect and handshake (a command may rightly
        take long); a server that accepts and never answers would hold its first command
        forever. Raises redis-py's connection or timeout error.
        """
        seconds = self._options.connect_timeout
        probe = Redis.from_url(
            self._options.url or "",
            retry=Retry(NoBackoff(), 0),
            retry_on_error=[],
            socket_connect_timeout=seconds,
            socket_timeout=seconds,
        )
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
        """Return this transport's own client of the cluster node at *host*:*port*."""
        name = f"{host}:{port}"
        client = self._node_clients.get(name)
        if client is None:
            client = Redis(
                host=host,
                port=port,
                retry=Retry(NoBackoff(), 0),
                retry_on_error=[],
                **self._node_options,
            )
            self._node_clients[name] = client
        return client

    async def _eval_waiting(
        self, client: Redis | RedisCluster, script: Script, by_sha: bool, args: Any
    ) -> Any:
        """Send *script* and ``WAIT`` for ``wait_replicas`` replicas on one connection (one
        round trip); return the script's reply.

        Raises ConnectionLost (``maybe_applied``) when fewer replicas confirmed the write in
        ``wait_timeout``; a redis-py error the script's reply is (MOVED, NOSCRIPT, ...).
        """
        target: Redis
        if isinstance(client, RedisCluster):
            cluster: Any = client  # the blocking cluster client has no type hints
            node = cluster.get_node_from_key(self._keys[0])
            target = self._node_client(node.host, node.port)
        else:
            target = client
        pipe: Any = target.pipeline(transaction=False)  # blocking pipelines are untyped
        if by_sha:
            pipe.evalsha(script.sha, 2, *self._keys, *args)
        else:
            pipe.eval(script.text, 2, *self._keys, *args)
        millis = max(1, round(self._options.wait_timeout * 1000))
        pipe.execute_command("WAIT", self._options.wait_replicas, millis)
        reply, acked = await pipe.execute(raise_on_error=False)
        if isinstance(reply, BaseException):
            raise reply
        failed = unreplicated(acked, self._options)
        if failed is not None:
            raise failed
        return reply

    async def _refresh_slots(self, client: Redis | RedisCluster) -> None:
        """Read the cluster's slot map again (after a failover or a MOVED); never raises."""
        if isinstance(client, RedisCluster):
            cluster: Any = client
            with contextlib.suppress(RedisError, RedisClusterException):
                await cluster.nodes_manager.initialize()

    async def _eval(
        self, client: Redis | RedisCluster, script: Script, by_sha: bool, args: Any
    ) -> Any:
        """Send *script* with the queue's keys: EVALSHA by its SHA, else EVAL of its text.

        On a cluster the command goes to the node of the queue's slot as a targeted command,
        which redis-py never retries (redirects are still followed).
        """
        if isinstance(client, RedisCluster):
            cluster: Any = client  # the blocking cluster client has no type hints
            node = cluster.get_node_from_key(self._keys[0])
            if by_sha:
                return await cluster.execute_command(
                    "EVALSHA", script.sha, 2, *self._keys, *args, target_nodes=node
                )
            return await cluster.execute_command(
                "EVAL", script.text, 2, *self._keys, *args, target_nodes=node
            )
        if by_sha:
            return await client.evalsha(script.sha, 2, *self._keys, *args)
        return await client.eval(script.text, 2, *self._keys, *args)

    @property
    def max_attempts(self) -> int | None:
        """Deliveries a head gets before ``on_exhausted`` applies; None means unlimited."""
        return self._options.common.max_attempts

    @property
    def on_exhausted(self) -> OnExhausted:
        """What happens to a head that used up ``max_attempts``: dead_letter or block."""
        return self._options.common.on_exhausted

    def _now(self) -> str:
        return now_arg(self._options.common.clock)

    def _lease(self, lease: object) -> Lease:
        """Check *lease* is a Lease of this queue and of Redis (no I/O); :meth:`_from_here`
        checks its store."""
        return check_backend(check_lease(lease, self.queue, None), ORIGIN)

    async def _store_origin(self) -> str:
        """Return ``Lease.origin`` of this queue's store (read once: one script call)."""
        if self._origin is None:
            value = await self._run("store_id", [""], repeatable=True)
            self._origin = f"{ORIGIN}:{text(value)}"
        return self._origin

    async def _from_here(self, leases: Iterable[Lease]) -> None:
        """Raise InvalidInput unless every lease of *leases* was issued by this queue's store
        (this server and database): asks the store which it is, once."""
        leases = list(leases)
        if not leases:
            return
        origin = await self._store_origin()
        for lease in leases:
            check_store(lease, origin)

    async def _run(
        self, name: str, args: Sequence[str | int | bytes], *, repeatable: bool = False
    ) -> Any:
        """Run script *name* on this queue's keys and return its reply (see :meth:`_run_script`)."""
        return await self._run_script(
            self._scripts[name], args, repeatable=repeatable, creates_meta=name in _CREATES_META
        )

    async def _run_script(
        self,
        script: Script,
        args: Sequence[str | int | bytes],
        *,
        repeatable: bool = False,
        creates_meta: bool = False,
    ) -> Any:
        """Run *script* (a script on a queue's keys, see _scripts) on this queue's keys and
        return its reply.

        A connection that could not be opened is retried with a bounded doubling pause; a
        connection lost after the command was sent is retried only when *repeatable*. A script
        that *creates_meta* makes the queue known once it succeeded (lua/lib/store.lua). Raises
        TransportClosed, ConnectionLost (QueueMoving while the queue's slot moves),
        ConfigurationError (credentials) or PgqueError.
        """
        self._check_open()
        pause = self._options.retry_backoff
        attempt = 0
        full = [script_flags(self._known, self._cluster), *args]
        # A write waits for its replicas (WAIT); a read has nothing to wait for (_NO_WAIT).
        waits = self._options.wait_replicas and not repeatable and script.name not in _NO_WAIT
        send = self._eval_waiting if waits else self._eval
        client: Redis | RedisCluster | None = None
        # Reaching the server (retries included) gives up at the connect timeout.
        deadline = time.monotonic() + self._options.connect_timeout
        while True:
            reaching = True
            try:
                client = await self._connected()
                reaching = False
                try:
                    reply = await send(client, script, True, full)
                except NoScriptError:
                    # SCRIPT FLUSH or a restarted server forgot it; nothing ran. EVAL sends the
                    # text (and caches it again) in the same call, so no flush can come between
                    # a reload and the rerun.
                    reply = await send(client, script, False, full)
                if creates_meta:
                    self._known = True
                return reply
            except AuthenticationError as exc:
                raise wrap_error(exc, self._options.masked_url) from exc
            except (RedisConnectionError, RedisTimeoutError) as exc:
                sent = not reaching and not nothing_sent(exc)
                final = not self._options.retry_refused and refused(exc)
                final = final or time.monotonic() + pause > deadline
                if final or attempt >= self._options.retries or (sent and not repeatable):
                    raise connection_lost(
                        exc, self._options.masked_url, sent, self._options.connect_timeout
                    ) from exc
                if client is not None:
                    await self._refresh_slots(client)  # a failover may have moved the slot
            except MovedError as exc:
                # Only a write waiting for replicas sees MOVED (redis-py follows it otherwise):
                # the slot's node changed and the script did not run.
                if attempt >= self._options.retries or client is None:
                    raise wrap_error(exc, self._options.masked_url) from exc
                await self._refresh_slots(client)
            except (*_CLUSTER_NOT_RUN, RedisClusterException) as exc:
                # The cluster is down or reshaping (a failover), or no seed answered: the
                # script did not run, so it is retried like a connection not opened.
                if not isinstance(exc, _CLUSTER_NOT_RUN) and "cannot be connected" not in str(exc):
                    raise wrap_error(exc, self._options.masked_url) from exc
                if attempt >= self._options.retries or time.monotonic() + pause > deadline:
                    raise connection_lost(
                        exc, self._options.masked_url, False, self._options.connect_timeout
                    ) from exc
            except RedisError as exc:
                raise wrap_error(exc, self._options.masked_url) from exc
            attempt += 1
            await asyncio.sleep(pause)
            pause = min(pause * 2, MAX_RETRY_PAUSE)

    @traced_publish
    async def publish(
        self, group_id: str, event: Event, *, priority: int = 0, delay: float = 0.0
    ) -> int:
        """Append *event* to *group_id*'s tail and return its message id (monotonic).

        With *delay* > 0 the message is scheduled: it joins the group's tail *delay* seconds
        from now (by the server's clock), keeping the returned id; until then no claim sees
        it. Raises InvalidInput for a bad group id, priority, delay or event; ConnectionLost
        or PgqueError when Redis fails.
        """
        group_id = check_group_id(group_id)
        priority = check_priority(priority)
        delay = check_delay(delay)
        body = self._options.common.event(event)
        reply = await self._run("publish", [self._now(), priority, repr(delay), group_id, body])
        return int(reply[0])

    @traced_publish
    async def publish_many(
        self, items: Iterable[tuple[str, Event]], *, priority: int = 0, delay: float = 0.0
    ) -> list[int]:
        """Append many (group_id, event) pairs atomically, in order; return their ids.

        With *delay* > 0 every item is scheduled, due at one time (see :meth:`publish`).
        Raises InvalidInput for a bad item, priority or delay; ConnectionLost or PgqueError.
        """
        priority = check_priority(priority)
        delay = check_delay(delay)
        checked = self._options.common.items(items)
        if not checked:
            if self._closed:
                raise TransportClosed()
            return []
        args: list[str | int] = [self._now(), priority, repr(delay)]
        for group_id, _event, body in checked:
            args += [group_id, body]
        reply = await self._run("publish", args)
        return [int(v) for v in reply]

    async def cancel(self, message_id: int) -> bool:
        """Drop a scheduled message that is not due yet; True if it was dropped.

        False when it is due (even if no call moved it into its group yet), delivered,
        unknown, or was published without a delay. Raises InvalidInput for an id that is not
        a positive int; ConnectionLost or PgqueError.
        """
        message_id = check_message_id(message_id)
        if message_id >= MAX_MESSAGE_ID:
            self._check_open()
            return False
        return bool(int(await self._run("cancel", [self._now(), message_id])))

    async def scheduled(
        self, *, limit: int = 100, after: int | None = None
    ) -> list[ScheduledMessage]:
        """Up to *limit* (1-1,000) scheduled messages not due yet, in id order, after id *after*.

        Due scheduled messages join their groups first, as :meth:`stats` says. Raises
        InvalidInput for a bad limit or after; ConnectionLost or PgqueError.
        """
        limit, after = check_scheduled_page(limit, after)
        start = scheduled_after(after)
        while True:
            reply = await self._run("scheduled", [self._now(), limit, start], repeatable=True)
            if reply is not None:
                return decode_scheduled(reply)
            await self._join_due()  # a backlog of due scheduled messages is to join first

    @traced_publish
    async def publish_tick(
        self, entry: str, tick: float, group_id: str, event: Event, *, priority: int = 0
    ) -> int | None:
        """Publish *event* to *group_id*'s tail as tick *tick* of schedule entry *entry*.

        Appended only if this queue has no recorded tick of *entry* at or after *tick*; the
        check, recording *tick* and the append are one script, so of several schedulers
        publishing one tick exactly one appends. Returns the message id, or None. Raises
        InvalidInput for a bad entry, tick, group id, event or priority; ConnectionLost or
        PgqueError.
        """
        entry = check_entry_name(entry)
        tick = check_tick(tick)
        group_id = check_group_id(group_id)
        priority = check_priority(priority)
        body = self._options.common.event(event)
        reply = await self._run(
            "publish_tick", [self._now(), entry, repr(tick), priority, group_id, body]
        )
        return None if reply is None else int(reply)

    async def server_time(self) -> float:
        """Return the Redis server's time now, epoch seconds (``TIME``; the injected clock
        when there is one). Raises ConnectionLost or PgqueError."""
        self._check_open()
        now = self._now()
        if now:
            return float(now)
        seconds, micros = await self._run("server_time", [""], repeatable=True)
        return int(seconds) + int(micros) / 1_000_000

    async def last_tick(self, entry: str) -> float | None:
        """The latest tick of *entry* published by :meth:`publish_tick`, or None.

        Raises InvalidInput for a bad entry; ConnectionLost or PgqueError.
        """
        entry = check_entry_name(entry)
        reply = await self._run("last_tick", [self._now(), entry], repeatable=True)
        return None if reply is None else float(text(reply))

    async def claim(
        self, visibility: float = 30.0, *, min_priority: int = 0, holder: str | None = None
    ) -> Lease | None:
        """Lease the head of the longest-unserved claimable group, or return None.

        *holder* labels the lease (``GroupInfo.lease_holder``). Raises InvalidInput for a bad
        visibility, min_priority or holder; ConnectionLost or PgqueError.
        """
        leases = await self.claim_many(1, visibility, min_priority=min_priority, holder=holder)
        return leases[0] if leases else None

    async def claim_many(
        self,
        n: int,
        visibility: float = 30.0,
        *,
        min_priority: int = 0,
        holder: str | None = None,
    ) -> list[Lease]:
        """Lease the heads (lowest message ids) of up to *n* distinct groups (never two of one
        group). Paused and blocked groups are never leased.

        Raises InvalidInput for a bad n, visibility, min_priority or holder; ConnectionLost or
        PgqueError.
        """
        n = check_batch_size(n)
        visibility = check_seconds(visibility, "visibility")
        min_priority = check_priority(min_priority, "min_priority")
        holders = [check_holder(holder)] * n
        leases: list[Lease] = []
        await self._claim_rounds(_CLAIM_ROUNDS, n, visibility, min_priority, holders, leases, [])
        return leases

    def _claim_args(
        self, visibility: float, min_priority: int, n: int, label: str
    ) -> list[str | int | bytes]:
        """Return the claim script's arguments up to its holder (claim.lua, settle_claim.lua)."""
        return [
            self._now(),
            repr(visibility),
            min_priority,
            n,
            *self._exhaustion,
            new_nonce(),
            label,
        ]

    async def _claim_rounds(
        self,
        rounds: int,
        n: int,
        visibility: float,
        min_priority: int,
        holders: list[str | None],
        leases: list[Lease],
        bad_groups: list[str | bytes],
    ) -> None:
        """Claim into *leases* until it holds *n*, in at most *rounds* claim calls.

        A call runs again only for the places heads that did not decode took (the script buries
        text that is not JSON itself; this is JSON that is not an Event). Later calls skip the
        groups this call leased, *bad_groups* (the groups of such heads) included, untouched:
        a lease that expired meanwhile is neither leased twice nor spent as an attempt, buried
        or blocked behind the caller's back.
        """
        for _ in range(rounds):
            if len(leases) >= n:
                return
            label = holder_arg(holders[len(leases) :])
            args = self._claim_args(visibility, min_priority, n - len(leases), label)
            if bad_groups:
                args += [lease.group_id for lease in leases]
                args += bad_groups
            reply = await self._run("claim", args)
            if not await self._take_leases(reply, leases, bad_groups):
                return

    async def _take_leases(
        self, reply: Sequence[Any], leases: list[Lease], bad_groups: list[str | bytes]
    ) -> bool:
        """Decode a claim reply into *leases*; dead-letter each head that did not decode and
        add its group to *bad_groups*. Returns whether any head did not decode."""
        good, bad = decode_leases(reply, self.queue, await self._store_origin())
        leases += good
        for item in bad:
            bad_groups.append(item.group_id)
            await self._bury_undecodable(item)
        return bool(bad)

    async def _bury_undecodable(self, item: Undecodable) -> None:
        """Dead-letter an undecodable head through its own lease (fenced like any other).

        If that fails the lease is left to expire, and the next claim of its group tries again;
        the decodable leases of the same claim are returned all the same.
        """
        try:
            await self._run(
                "dead_letter",
                [self._now(), item.group_id, item.token, item.message_id, item.reason, "", ""],
            )
        except PgqueError as exc:
            log.warning("could not dead-letter an undecodable message: %s", exc)
            return
        log.warning("dead-lettered an undecodable message of queue %s: %s", self.queue, item.reason)

    async def ack(self, lease: Lease) -> bool:
        """Remove the leased message and free its group; False if the lease is not held.

        Raises InvalidInput for a lease of another queue or store; ConnectionLost or PgqueError.
        """
        results = await self.ack_many([lease])
        return results[0]

    async def ack_many(self, leases: Sequence[Lease]) -> list[bool]:
        """Ack several leases in one call; one result per lease, in order.

        Raises InvalidInput for a lease of another queue or store; ConnectionLost or PgqueError.
        """
        checked = [self._lease(lease) for lease in leases]
        if not checked:
            if self._closed:
                raise TransportClosed()
            return []
        await self._from_here(checked)
        args: list[str | int] = [self._now()]
        for lease in checked:
            args += [lease.group_id, lease.token, lease.message_id]
        reply = await self._run("ack", args)
        return [bool(int(v)) for v in reply]

    async def settle_and_claim(
        self,
        settlements: Sequence[Settlement],
        n: int,
        visibility: float = 30.0,
        *,
        min_priority: int = 0,
        holder: str | Sequence[str] | None = None,
    ) -> SettleResult:
        """Settle finished leases, then lease up to *n* new heads, in one script call.

        Each settlement acts exactly as its :meth:`ack`, :meth:`nack`, :meth:`release` or
        :meth:`dead_letter` would, in order, each fenced on its own (``settled[i]`` False: not
        held, no change); then up to *n* heads of distinct groups are leased as
        :meth:`claim_many` leases them (*n* 0: settle only). One atomic script, so a lost
        connection leaves all of it or none. A head whose stored JSON is no Event is
        dead-lettered and its place claimed again, as :meth:`claim_many` does. Raises
        InvalidInput before any I/O for a bad settlement, n, visibility, min_priority or
        holder; ConnectionLost or PgqueError.
        """
        checked = check_settlements(settlements, self.queue, None, 0.0)
        for item in checked:
            check_backend(item.lease, ORIGIN)
        n = check_claim_count(n)
        visibility = check_seconds(visibility, "visibility")
        min_priority = check_priority(min_priority, "min_priority")
        holders = check_holders(holder, n)
        tail = settlement_args(checked, settlements)
        if not checked and not n:
            if self._closed:
                raise TransportClosed()
            return SettleResult([], [])
        args = self._claim_args(visibility, min_priority, n, holder_arg(holders))
        args += tail
        await self._from_here(item.lease for item in checked)
        reply = await self._run("settle_claim", args)
        count = len(checked)
        settled = [bool(int(v)) for v in reply[:count]]
        leases: list[Lease] = []
        bad_groups: list[str | bytes] = []
        if await self._take_leases(reply[count:], leases, bad_groups):
            await self._claim_rounds(
                _CLAIM_ROUNDS - 1, n, visibility, min_priority, holders, leases, bad_groups
            )
        return SettleResult(settled, leases)

    async def nack(
        self, lease: Lease, *, delay: float = 0.0, error: ErrorLike | None = None
    ) -> bool:
        """Give the message back (the attempt counts); with *delay* > 0 park its whole group.

        *error* (an exception, a string or an ErrorInfo) becomes the message's last error
        (``GroupInfo.last_error``, and ``DeadLetter.error`` should it be dead-lettered later);
        without it the stored one stays. Raises InvalidInput for a foreign lease, bad delay
        or error; ConnectionLost or PgqueError.
        """
        lease = self._lease(lease)
        delay = check_seconds(delay, "delay")
        record, at = error_args(error)
        await self._from_here([lease])
        reply = await self._run(
            "nack",
            [
                self._now(),
                lease.group_id,
                lease.token,
                lease.message_id,
                repr(delay),
                record,
                at,
            ],
        )
        return bool(int(reply))

    async def release(self, lease: Lease) -> bool:
        """Give the message back for immediate redelivery without counting the attempt.

        For a graceful shutdown; the message's last error stays. Fenced like :meth:`ack`:
        False if the lease is not held. Raises InvalidInput for a foreign lease;
        ConnectionLost or PgqueError.
        """
        lease = self._lease(lease)
        await self._from_here([lease])
        reply = await self._run(
            "release", [self._now(), lease.group_id, lease.token, lease.message_id]
        )
        return bool(int(reply))

    async def extend(self, lease: Lease, visibility: float) -> Lease | None:
        """Renew a held lease to expire *visibility* seconds from now; None if not held.

        Raises InvalidInput for a foreign lease or bad visibility; ConnectionLost or PgqueError.
        """
        lease = self._lease(lease)
        visibility = check_seconds(visibility, "visibility")
        await self._from_here([lease])
        reply = await self._run(
            "extend",
            [self._now(), lease.group_id, lease.token, lease.message_id, repr(visibility)],
        )
        if reply is None:
            return None
        return lease.model_copy(update={"expires_at": float(text(reply))})

    async def dead_letter(
        self, lease: Lease, reason: str, *, error: ErrorLike | None = None
    ) -> bool:
        """Move the leased message to the dead-letter store; its group continues.

        The dead letter keeps *error* as ``DeadLetter.error``, else the message's last
        recorded error. Raises InvalidInput for a foreign lease, bad reason or error;
        ConnectionLost or PgqueError.
        """
        lease = self._lease(lease)
        reason = check_reason(reason)
        record, at = error_args(error)
        await self._from_here([lease])
        reply = await self._run(
            "dead_letter",
            [self._now(), lease.group_id, lease.token, lease.message_id, reason, record, at],
        )
        return bool(int(reply))

    async def dead_letters(self, limit: int = 100, *, after: int | None = None) -> list[DeadLetter]:
        """List up to *limit* dead letters in id order (oldest first), those after id *after*.

        Raises InvalidInput for a bad limit or after; ConnectionLost or PgqueError.
        """
        limit = check_limit(limit)
        start = dead_letter_after(check_after_id(after))
        reply = await self._run("dead_letters", [self._now(), limit, start], repeatable=True)
        return decode_dead_letters(reply)

    async def delete_dead_letters(self, ids: Sequence[int]) -> int:
        """Delete the dead letters with these ids; return how many existed and are deleted.

        Raises InvalidInput for bad ids (None included); ConnectionLost or PgqueError.
        """
        chosen = check_ids(ids)
        if chosen is None:
            raise InvalidInput("ids must be a sequence of dead-letter ids, not None")
        if not chosen:
            self._check_open()
            return 0
        args: list[str | int] = [self._now(), *sorted(set(chosen))]
        return int(await self._run("delete_dead_letters", args))

    async def redrive(
        self, ids: Sequence[int] | None = None, *, in_place: bool = True, retry_now: bool = False
    ) -> int:
        """Return dead letters (all when *ids* is None) to their groups; return how many.

        In place (the default) a dead letter goes back into its group under its original
        message id, ahead of every later message of the group (a lease out finishes first),
        attempts cleared and its error kept as its last error; a missing group is created with
        the dead letter's priority, an existing one keeps its priority, holds and retry delay
        (ended when *retry_now*). ``in_place=False`` publishes it anew at the tail. Unknown
        ids are ignored. Raises InvalidInput for bad ids or flags; ConnectionLost or
        PgqueError.
        """
        chosen = check_ids(ids)
        for name, flag in (("in_place", in_place), ("retry_now", retry_now)):
            if not isinstance(flag, bool):
                raise InvalidInput(f"{name} must be a bool, not {type(flag).__name__}")
        args: list[str | int] = [self._now()]
        if chosen is None:
            args.append("all")
        else:
            args.append("ids")
        args.append("1" if in_place else "0")
        args.append("1" if retry_now else "0")
        if chosen is not None:
            args += sorted(set(chosen))
        return int(await self._run("redrive", args))

    async def unblock(
        self, group_id: str, *, drop_head: bool = False, head: int | None = None
    ) -> bool:
        """Release a group blocked by ``on_exhausted="block"``.

        The head is retried with a fresh attempt count, or dead-lettered when *drop_head*.
        With *head* (a message id), only if that message is still the group's head.
        Returns False if the group is not blocked (or its head is another message). Raises
        InvalidInput for a bad group id or head; ConnectionLost or PgqueError.
        """
        group_id = check_group_id(group_id)
        expected = check_head(head)
        reply = await self._run(
            "unblock",
            [
                self._now(),
                group_id,
                "1" if drop_head else "0",
                OPERATOR_DROP_REASON,
                "" if expected is None else str(expected),
            ],
        )
        return bool(int(reply))

    async def retry_now(self, group_id: str) -> bool:
        """End the retry delay the group waits out: its head is claimable at once, its attempt
        count and last error kept (a paused group stays paused). False if it waits for none.
        Raises InvalidInput for a bad group id; ConnectionLost or PgqueError."""
        group_id = check_group_id(group_id)
        return bool(int(await self._run("retry_now", [self._now(), group_id])))

    async def pause(self, group_id: str) -> bool:
        """Hold *group_id*: no claim leases it until :meth:`resume` (a lease out finishes).

        Publishes still append; an empty paused group is kept; a group that does not exist
        yet is created paused (priority 0). False if it was already paused. Raises
        InvalidInput for a bad group id; ConnectionLost or PgqueError.
        """
        group_id = check_group_id(group_id)
        return bool(int(await self._run("pause", [self._now(), group_id])))

    async def resume(self, group_id: str) -> bool:
        """Lift the hold of :meth:`pause`; False if the group is not paused (or absent).

        A resumed group without messages is removed. Raises InvalidInput for a bad group id;
        ConnectionLost or PgqueError.
        """
        group_id = check_group_id(group_id)
        return bool(int(await self._run("resume", [self._now(), group_id])))

    async def group(self, group_id: str) -> GroupInfo | None:
        """Everything about one group, or None if this queue has no such group.

        One script call, O(log n). Described as if every due scheduled message of the group
        had joined: the script moves up to a thousand of them in; with more due, the
        transport moves the queue's due messages as :meth:`stats` does and asks again. Raises
        InvalidInput for a bad group id; ConnectionLost or PgqueError.
        """
        group_id = check_group_id(group_id)
        while True:
            reply = await self._run("group", [self._now(), group_id], repeatable=True)
            if reply is not None:
                return decode_group(reply)
            await self._join_due()  # a backlog of due scheduled messages is to join first

    async def groups(
        self,
        *,
        state: GroupStateName | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[GroupInfo]:
        """Up to *limit* (1-1,000) groups in byte order of id, those after *after*.

        Keyset paging: pass the last ``group_id`` of a page as *after* for the next one. With
        *state*, only groups in that state: paused and blocked groups have indexes of their
        own; a page of another state is filled by script calls that each examine at most
        :data:`~pgque.redis._arguments.GROUPS_SCAN_BUDGET` groups, each going on after the last
        group the one before examined, until the page is full or no group is left. Due
        scheduled messages join their groups first, as :meth:`stats` says. Raises
        InvalidInput for a bad state, limit or after; ConnectionLost or PgqueError.
        """
        want, limit, start = check_groups_page(state, limit, after)
        cursor: str | bytes = "-" if start is None else "(" + start
        page: list[GroupInfo] = []
        while True:
            reply = await self._run(
                "groups",
                [self._now(), want or "", limit - len(page), cursor, GROUPS_SCAN_BUDGET],
                repeatable=True,
            )
            if not reply:  # a backlog of due scheduled messages is to join first
                await self._join_due()
                continue
            ended, last, infos = decode_groups_page(reply)
            page += infos
            if ended or last is None or len(page) >= limit:
                return page
            cursor = b"(" + last if isinstance(last, bytes) else "(" + last

    async def oldest_groups(
        self,
        *,
        limit: int = 10,
        state: GroupStateName | None = None,
    ) -> list[GroupInfo]:
        """Up to *limit* (1-1,000) groups holding a message, the oldest head first.

        Ordered by ``head_enqueued_at``, then group id in byte order; with *state*, only groups
        in that state. The queue keeps its groups in a sorted set scored by their head's
        enqueue time (``<key prefix>heads``); each script call examines at most
        :data:`~pgque.redis._arguments.GROUPS_SCAN_BUDGET` of them and the next goes on after the
        last one examined. A queue written before that set existed is indexed by the first
        calls (as many groups per call). Raises InvalidInput for a bad state or limit;
        ConnectionLost or PgqueError.
        """
        want, limit = check_oldest_groups(state, limit)
        score: str | bytes = ""
        after: str | bytes = ""
        page: list[GroupInfo] = []
        while True:
            reply = await self._run(
                "oldest_groups",
                [self._now(), want or "", limit - len(page), score, after, GROUPS_SCAN_BUDGET],
                repeatable=True,
            )
            if not reply:  # due scheduled messages to join first, or the index to build
                await self._join_due()
                continue
            ended, last, infos = decode_groups_page([reply[0], reply[2], *reply[3:]])
            page += infos
            if ended or last is None or len(page) >= limit:
                return page
            score, after = reply[1], last

    async def wait_for_messages(self, timeout: float) -> bool:
        """Wait up to *timeout* seconds for news of claimable messages; True if some came.

        Idle workers call this instead of sleeping. The transport subscribes to the queue's
        wake channel (``<key prefix>wake``), which every publish, redrive, unblock, resume,
        release and nack without delay announces, so the wait ends at once. A True may be
        spurious (the caller claims and finds nothing); False means the time passed. The first
        call returns True as soon as it subscribes, since a publish just before that was not
        heard. The wait never outlasts the next scheduled message's due time (read first, one
        ZRANGE): it then returns True, since that message is claimable; a delayed publish
        announces itself too, so a waiter re-reads a sooner due time. Raises InvalidInput for
        a bad timeout, TransportClosed, ConnectionLost or PgqueError.
        """
        timeout = check_seconds(timeout, "timeout")
        self._check_open()
        cap = wait_cap(await self._run("next_due", [self._now()], repeatable=True), timeout)
        try:
            if cap is None:
                return await self._wakeups.wait(timeout)
            await self._wakeups.wait(cap)
            return True  # a wake-up, or the due time came
        except (RedisConnectionError, RedisTimeoutError, RedisClusterException) as exc:
            raise connection_lost(exc, self._options.masked_url, True) from exc
        except RedisError as exc:
            raise wrap_error(exc, self._options.masked_url) from exc

    async def _subscribe(self) -> bool:
        client = await self._connected()
        channel = self._prefix + "wake"
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
            return True
        # Kept before subscribing, so a failed or cancelled subscribe can be dropped (reset).
        self._pubsub = PubSub(client.connection_pool, ignore_subscribe_messages=True)
        await self._pubsub.subscribe(channel)
        return True

    async def _note(self, pubsub: PubSub, timeout: float) -> Any:
        """Return the next wake-up of the subscription within *timeout* seconds, or None."""
        if isinstance(pubsub, ClusterPubSub):
            sharded: Any = pubsub  # the blocking cluster client has no type hints
            return await sharded.get_sharded_message(
                ignore_subscribe_messages=True, timeout=timeout
            )
        return await pubsub.get_message(ignore_subscribe_messages=True, timeout=timeout)

    async def _heard(self, timeout: float) -> bool:
        """Read the subscription until a wake-up (True) or *timeout* seconds pass (False)."""
        pubsub = self._pubsub
        if pubsub is None:  # pragma: no cover - the waiter subscribes first
            return False
        deadline = time.monotonic() + timeout
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            note = await self._note(pubsub, remaining)
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

    async def stats(self) -> QueueStats:
        """Return counts of groups, messages, in-flight, parked, blocked and dead letters,
        and of scheduled messages not yet due (with the soonest due time).

        Counted as if every due scheduled message had joined its group: they join first (in
        the same script call; a backlog of more than a thousand by several calls, a thousand
        each, before the count).

        Raises ConnectionLost or PgqueError.
        """
        while True:
            reply = await self._run("stats", [self._now()], repeatable=True)
            if reply:
                return decode_stats(reply)
            await self._join_due()  # a backlog of due scheduled messages is to join first

    async def _join_due(self) -> None:
        """Move every due scheduled message into its group, :data:`JOIN_BATCH` per script
        call, so that a backlog never holds Redis for long."""
        while True:
            moved = await self._run("join_due", [self._now(), JOIN_BATCH], repeatable=True)
            if int(moved) < JOIN_BATCH:
                return

    async def queues(self) -> list[str]:
        """Return the names of every queue in this Redis database holding messages or dead letters.

        Sorted in byte order. A SCAN of the keyspace (incremental: Redis serves other clients
        meanwhile). Raises TransportClosed, ConnectionLost or PgqueError.
        """
        if self._closed:
            raise TransportClosed()
        names: set[str] = set()
        try:
            client = await self._connected()
            for pattern in QUEUE_MARKER_PATTERNS:
                async for key in client.scan_iter(match=pattern, count=1000):
                    name = queue_of_marker(text(key))
                    if name is not None:
                        names.add(name)
        except AuthenticationError as exc:
            raise wrap_error(exc, self._options.masked_url) from exc
        except (RedisConnectionError, RedisTimeoutError, RedisClusterException) as exc:
            raise connection_lost(exc, self._options.masked_url, False) from exc
        except RedisError as exc:
            raise wrap_error(exc, self._options.masked_url) from exc
        return sorted(names, key=lambda name: name.encode("utf-8"))

    async def purge(self) -> None:
        """Delete every message, group and dead letter of this queue (tests, operators).

        Not part of the transport contract. Raises ConnectionLost or PgqueError.
        """
        await self._run("purge", [self._now()])

    async def close(self) -> None:
        """Close the connections this transport opened (not an injected client); idempotent."""
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

    async def __aenter__(self) -> AsyncRedisTransport:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
