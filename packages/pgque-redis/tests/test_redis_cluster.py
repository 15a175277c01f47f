"""Redis Cluster as a deployment: the redis+cluster URL, injected cluster clients, sharded
wake-ups, no blind resend of a script, and a live queue whose slot migrates.

Every test here runs on a real six-node cluster (the conformance plugin's ``redis_cluster``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster
from redis.crc import key_slot

from pgque.conformance.servers.redis_cluster import RedisClusterServer, find_binaries
from pgque.core import ConnectionLost, Event, QueueMoving, Worker, connect, connect_async
from pgque.core.errors import ConfigurationError, InvalidInput
from pgque.redis import AsyncRedisTransport, RedisTransport, key_prefix, spread_queue_names
from pgque.redis._options import cluster_seeds, resolve_options

pytestmark = pytest.mark.timeout(60)


def _queue() -> str:
    return f"c_{uuid.uuid4().hex[:20]}"


def _node(port: int) -> Any:
    """A client of one node (Any: redis-py's command methods have no type hints)."""
    return redis.Redis(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=5)


def _url(cluster: RedisClusterServer, queue: str, extra: str = "") -> str:
    return f"{cluster.url}?queue={queue}{extra}"


# --- the URL ------------------------------------------------------------------------------


def test_a_cluster_url_names_its_seeds_and_keeps_credentials_and_options() -> None:
    first, seeds = cluster_seeds("redis+cluster://u:pw@h1:7000,h2,[::1]:7002/?socket_timeout=3")
    assert seeds == (("h1", 7000), ("h2", 6379), ("::1", 7002))
    assert first == "redis://u:pw@h1:7000/0?socket_timeout=3"
    tls, _ = cluster_seeds("rediss+cluster://h1:7000")
    assert tls == "rediss://h1:7000/0"


@pytest.mark.parametrize(
    "url",
    ["redis+cluster:///", "redis+cluster://h1:7000/3", "redis+cluster://h1:notaport/"],
)
def test_a_bad_cluster_url_is_a_configuration_error(url: str) -> None:
    with pytest.raises(ConfigurationError):
        RedisTransport(url)


def test_a_cluster_url_waits_for_one_replica_by_default_and_a_plain_url_for_none() -> None:
    def resolved(url: str, **options: Any) -> tuple[int, float]:
        chosen = resolve_options(
            url,
            has_client=False,
            queue=None,
            max_attempts=None,
            on_exhausted=None,
            clock=None,
            retries=None,
            retry_backoff=None,
            **options,
        )
        return chosen.wait_replicas, chosen.wait_timeout

    assert resolved("redis+cluster://h1:7000/") == (1, 1.0)
    assert resolved("redis://h1:6379/0") == (0, 1.0)
    assert resolved("redis+cluster://h1:7000/?wait_replicas=0&wait_timeout=0.5") == (0, 0.5)
    assert resolved("redis+cluster://h1:7000/?wait_replicas=0", wait_replicas=2) == (2, 1.0)
    with pytest.raises(ConfigurationError):
        resolved("redis+cluster://h1:7000/?wait_replicas=-1")


def test_an_injected_cluster_client_cannot_wait_for_replicas(
    redis_cluster: RedisClusterServer,
) -> None:
    with redis_cluster.client() as client:
        with pytest.raises(ConfigurationError, match="wait_replicas"):
            RedisTransport(client=client, queue="q", wait_replicas=1)
        RedisTransport(client=client, queue="q").close()  # no wait by default


def test_connect_opens_cluster_transports_for_the_cluster_url(
    redis_cluster: RedisClusterServer,
) -> None:
    queue = _queue()
    with connect(_url(redis_cluster, queue)) as transport:
        assert isinstance(transport, RedisTransport)
        assert transport.cluster
        first = transport.publish("g", Event(kind="k", data=1))
        second = transport.publish("g", Event(kind="k", data=2))
        lease = transport.claim()
        assert lease is not None
        assert (lease.message_id, lease.event.data) == (first, 1)
        assert transport.ack(lease)
        assert transport.queues().count(queue) == 1
        assert transport.stats().messages == 1
        assert second > first
        transport.purge()


def test_connect_async_opens_an_async_cluster_transport(
    redis_cluster: RedisClusterServer,
) -> None:
    async def scenario() -> None:
        transport = connect_async(_url(redis_cluster, _queue()))
        assert isinstance(transport, AsyncRedisTransport)
        async with transport:
            await transport.publish("g", Event(kind="k"))
            lease = await transport.claim()
            assert lease is not None
            assert await transport.ack(lease)
            await transport.purge()

    asyncio.run(scenario())


# --- wake-ups -------------------------------------------------------------------------------


def test_an_injected_cluster_client_waits_for_a_publish_on_the_sharded_channel(
    redis_cluster: RedisClusterServer,
) -> None:
    client = redis_cluster.client()
    queue = _queue()
    with client, RedisTransport(client=client, queue=queue) as consumer:
        producer = RedisTransport(_url(redis_cluster, queue))
        with producer:
            assert consumer.wait_for_messages(5.0) is True  # just subscribed
            assert consumer.wait_for_messages(0.2) is False
            start = time.monotonic()
            timer = threading.Timer(0.2, lambda: producer.publish("g", Event(kind="k")))
            timer.start()
            assert consumer.wait_for_messages(10.0) is True
            assert time.monotonic() - start < 3.0
            timer.join()
            producer.purge()


def test_an_async_injected_cluster_client_waits_for_a_publish(
    redis_cluster: RedisClusterServer,
) -> None:
    async def scenario() -> None:
        client = AsyncRedisCluster.from_url(redis_cluster.seed_url)
        queue = _queue()
        consumer = AsyncRedisTransport(client=client, queue=queue)
        producer = AsyncRedisTransport(_url(redis_cluster, queue))
        try:
            assert await consumer.wait_for_messages(5.0) is True
            assert await consumer.wait_for_messages(0.2) is False

            async def later() -> None:
                await asyncio.sleep(0.2)
                await producer.publish("g", Event(kind="k"))

            start = time.monotonic()
            task = asyncio.create_task(later())
            assert await consumer.wait_for_messages(10.0) is True
            assert time.monotonic() - start < 3.0
            await task
            await producer.purge()
        finally:
            await consumer.close()
            await producer.close()
            await client.aclose()

    asyncio.run(scenario())


def test_an_idle_worker_on_a_cluster_logs_no_error_and_wakes_on_a_publish(
    redis_cluster: RedisClusterServer, caplog: pytest.LogCaptureFixture
) -> None:
    queue = _queue()
    consumer = RedisTransport(_url(redis_cluster, queue))
    producer = RedisTransport(_url(redis_cluster, queue))
    handled: list[float] = []
    done = threading.Event()

    def handler(_event: Event) -> None:
        handled.append(time.monotonic())
        done.set()

    # An idle poll of 20 s: only a wake-up can explain a quick pick-up.
    worker = Worker(consumer, handler, idle_backoff=(20.0, 20.0), shutdown_grace=1.0)
    caplog.set_level(logging.WARNING)
    runner = threading.Thread(target=worker.run, kwargs={"install_signal_handlers": False})
    runner.start()
    try:
        time.sleep(1.0)  # the worker is idle, waiting on the sharded channel
        published = time.monotonic()
        producer.publish("g", Event(kind="k"))
        assert done.wait(10.0), "the publish was not handled"
        assert handled[0] - published < 2.0
    finally:
        worker.stop()
        producer.publish("g", Event(kind="wake"))  # end the worker's wait now, not in 20 s
        runner.join(30)
        producer.purge()
        producer.close()
        consumer.close()
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert errors == []


# --- no blind resend --------------------------------------------------------------------


def _wait_blocked(port: int, command: str) -> int:
    """Wait until a client of the node at *port* is blocked (paused) in *command*; its id."""
    node = _node(port)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for entry in node.client_list():
                if "b" in entry["flags"] and entry["cmd"] == command:
                    return int(entry["id"])
            time.sleep(0.02)
        raise AssertionError(f"no client of {port} got blocked in {command}")
    finally:
        node.close()


def test_a_script_cut_off_after_it_was_sent_is_not_resent_by_a_retrying_client(
    redis_cluster: RedisClusterServer,
) -> None:
    # An injected client with redis-py's default retries (it would resend on a lost connection).
    client: Any = redis_cluster.client()
    queue = _queue()
    with client, RedisTransport(client=client, queue=queue) as transport:
        transport.publish("g", Event(kind="first"))
        port = redis_cluster.primary_of(client.keyslot(transport.key_prefix))
        primary = _node(port)
        outcome: list[BaseException] = []

        def publish() -> None:
            try:
                transport.publish("g", Event(kind="second"))
            except BaseException as exc:
                outcome.append(exc)

        try:
            primary.client_pause(5000, all=False)  # writes wait; the publish is sent
            thread = threading.Thread(target=publish)
            thread.start()
            victim = _wait_blocked(port, "evalsha")
            primary.client_kill_filter(_id=str(victim))  # the connection dies after the send
            thread.join(10)
        finally:
            primary.client_unpause()
            primary.close()
        assert len(outcome) == 1
        assert isinstance(outcome[0], ConnectionLost)
        assert outcome[0].maybe_applied
        time.sleep(0.5)  # a resent script would have run by now
        assert transport.stats().messages == 1
        transport.purge()


# --- a live queue whose slot migrates ----------------------------------------------------------


def _slot_nodes(cluster: RedisClusterServer, slot: int) -> tuple[int, int]:
    source = cluster.primary_of(slot)
    target = next(port for port in cluster.primaries() if port != source)
    return source, target


def _keys_of(port: int, slot: int) -> list[str]:
    node = _node(port)
    try:
        return sorted(node.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100000))
    finally:
        node.close()


def _dump(port: int, slot: int) -> dict[str, Any]:
    """Return {key: DUMP} of every key of *slot* on the node at *port* (ASKING first: the
    node may be importing the slot)."""
    raw: Any = redis.Redis(host="127.0.0.1", port=port, single_connection_client=True)
    try:
        out: dict[str, Any] = {}
        for key in _keys_of(port, slot):
            raw.execute_command("ASKING")
            out[key] = raw.dump(key)
        return out
    finally:
        raw.close()


def _migrate(source: int, target: int, keys: list[str]) -> None:
    node = _node(source)
    try:
        if keys:
            node.execute_command("MIGRATE", "127.0.0.1", target, "", 0, 5000, "KEYS", *keys)
    finally:
        node.close()


def _setslot(port: int, slot: int, *args: Any) -> None:
    node = _node(port)
    try:
        node.execute_command("CLUSTER", "SETSLOT", slot, *args)
    finally:
        node.close()


def _myid(port: int) -> str:
    node = _node(port)
    try:
        return str(node.execute_command("CLUSTER", "MYID"))
    finally:
        node.close()


def _every_call_is_refused(transport: RedisTransport, lease: Any) -> None:
    """Publish, claim, ack, stats: each raises QueueMoving, none is applied."""
    calls: list[Callable[[], object]] = [
        lambda: transport.publish("a", Event(kind="during")),
        lambda: transport.claim_many(5, 30.0),
        lambda: transport.ack(lease),
        lambda: transport.stats(),
    ]
    for call in calls:
        with pytest.raises(QueueMoving) as caught:
            call()
        assert not caught.value.maybe_applied
        assert "slot" in str(caught.value)


@pytest.fixture
def migrating(redis_cluster: RedisClusterServer) -> Iterator[tuple[RedisTransport, int]]:
    """A transport on a fresh queue and its slot; the slot is made stable again at the end."""
    queue = _queue()
    transport = RedisTransport(_url(redis_cluster, queue))
    assert isinstance(transport.client, RedisCluster)
    client: Any = transport.client
    slot = int(client.keyslot(transport.key_prefix))
    yield transport, slot
    for port in redis_cluster.primaries():
        _setslot(port, slot, "STABLE")
    with contextlib.suppress(QueueMoving):  # a test may leave the queue lost on purpose
        transport.purge()
    transport.close()
    redis_cluster.wait_ok()


def _fill(transport: RedisTransport) -> dict[str, list[int]]:
    published: dict[str, list[int]] = {"a": [], "b": [], "c": []}
    for i in range(12):
        group = "abc"[i % 3]
        published[group].append(transport.publish(group, Event(kind="k", data=i)))
    return published


def _drain(transport: RedisTransport) -> dict[str, list[int]]:
    got: dict[str, list[int]] = {}
    while True:
        lease = transport.claim(30.0)
        if lease is None:
            return got
        got.setdefault(lease.group_id, []).append(lease.message_id)
        assert transport.ack(lease)


@pytest.mark.parametrize("meta_moved_first", [False, True])
def test_a_migration_of_a_live_queues_slot_is_refused_then_completes_with_nothing_forked(
    redis_cluster: RedisClusterServer,
    migrating: tuple[RedisTransport, int],
    meta_moved_first: bool,
) -> None:
    transport, slot = migrating
    published = _fill(transport)
    lease = transport.claim(30.0)
    assert lease is not None
    source, target = _slot_nodes(redis_cluster, slot)
    _setslot(target, slot, "IMPORTING", _myid(source))
    _setslot(source, slot, "MIGRATING", _myid(target))
    keys = _keys_of(source, slot)
    meta = transport.key_prefix + "meta"
    part = [key for key in keys if (key == meta) == meta_moved_first][: max(1, len(keys) // 2)]
    _migrate(source, target, part)  # the queue is now half here, half there
    before = (_dump(source, slot), _dump(target, slot))
    _every_call_is_refused(transport, lease)
    assert (_dump(source, slot), _dump(target, slot)) == before  # nothing was written
    # Complete the migration: the rest of the keys, then the slot itself.
    _migrate(source, target, _keys_of(source, slot))
    for port in (target, source, *redis_cluster.primaries()):
        _setslot(port, slot, "NODE", _myid(target))
    redis_cluster.wait_ok()
    assert transport.ack(lease)  # the lease taken before the move is still held
    got = _drain(transport)
    got[lease.group_id] = [lease.message_id, *got.get(lease.group_id, [])]
    assert got == published  # every message once, in order, from the target
    assert _keys_of(source, slot) == []


def _open_move(source: int, target: int, slot: int) -> None:
    _setslot(target, slot, "IMPORTING", _myid(source))
    _setslot(source, slot, "MIGRATING", _myid(target))


def _finish_move(cluster: RedisClusterServer, source: int, target: int, slot: int) -> None:
    _migrate(source, target, _keys_of(source, slot))
    for port in (target, source, *cluster.primaries()):
        _setslot(port, slot, "NODE", _myid(target))
    cluster.wait_ok()


def test_a_migration_undone_by_moving_the_slot_back_leaves_the_queue_whole_on_its_source(
    redis_cluster: RedisClusterServer, migrating: tuple[RedisTransport, int]
) -> None:
    transport, slot = migrating
    published = _fill(transport)
    source, target = _slot_nodes(redis_cluster, slot)
    _open_move(source, target, slot)
    keys = _keys_of(source, slot)
    _migrate(source, target, keys[: len(keys) // 2])
    with pytest.raises(QueueMoving):
        transport.publish("a", Event(kind="during"))
    # Undo it the safe way: finish the move, then move the slot back whole (a source set
    # STABLE while the target holds part of the queue would serve the other part alone).
    _finish_move(redis_cluster, source, target, slot)
    _open_move(target, source, slot)
    keys = _keys_of(target, slot)
    _migrate(target, source, keys[: len(keys) // 2])
    with pytest.raises(QueueMoving):
        transport.claim()
    _finish_move(redis_cluster, target, source, slot)
    assert _keys_of(target, slot) == []
    assert _drain(transport) == published


def test_a_known_queue_on_a_node_without_its_meta_key_is_refused_and_nothing_is_written(
    redis_cluster: RedisClusterServer, migrating: tuple[RedisTransport, int]
) -> None:
    transport, slot = migrating
    transport.publish("a", Event(kind="k"))
    source, target = _slot_nodes(redis_cluster, slot)
    # The slot is handed to another node without its keys (a half-done manual reshard): that
    # node has none of the queue, and the source drops its copy when it learns of the move.
    _setslot(target, slot, "IMPORTING", _myid(source))
    for port in (target, *(p for p in redis_cluster.primaries() if p != source)):
        _setslot(port, slot, "NODE", _myid(target))
    redis_cluster.wait_ok()
    deadline = time.monotonic() + 10
    while _keys_of(source, slot) and time.monotonic() < deadline:
        time.sleep(0.1)
    with pytest.raises(QueueMoving, match="meta key"):
        transport.publish("a", Event(kind="lost?"))
    with pytest.raises(QueueMoving):
        transport.claim()
    assert _keys_of(target, slot) == []  # nothing was written on the wrong node
    # The slot goes back to the source for the next test.
    for port in redis_cluster.primaries():
        _setslot(port, slot, "NODE", _myid(source))
    redis_cluster.wait_ok()


# --- spreading one logical queue over the primaries -------------------------------------------


def test_six_spread_names_cover_all_three_primaries_two_each(
    redis_cluster: RedisClusterServer,
) -> None:
    client: Any = redis_cluster.client()
    with client:
        names = spread_queue_names(client, "orders", 6)
        assert len(set(names)) == 6
        owners = [redis_cluster.primary_of(int(client.keyslot(key_prefix(n)))) for n in names]
    assert sorted(owners.count(port) for port in redis_cluster.primaries()) == [2, 2, 2]
    with RedisTransport(_url(redis_cluster, "orders")) as transport:
        assert spread_queue_names(transport, "orders", 6) == names  # a transport works too


def test_fewer_spread_names_than_primaries_are_each_on_their_own(
    redis_cluster: RedisClusterServer,
) -> None:
    client: Any = redis_cluster.client()
    with client:
        names = spread_queue_names(client, "q", 2)
        owners = {redis_cluster.primary_of(int(client.keyslot(key_prefix(n)))) for n in names}
    assert len(owners) == 2


@pytest.mark.parametrize("count", [0, -1, 1025, True, 2.0])
def test_a_bad_spread_count_is_invalid_input(count: Any) -> None:
    with pytest.raises(InvalidInput):
        spread_queue_names(redis.Redis(), "orders", count)


def test_spread_names_on_one_server_are_the_first_ones(redis_url: str) -> None:
    with redis.Redis.from_url(redis_url) as client:
        assert spread_queue_names(client, "orders", 3) == ["orders_0", "orders_1", "orders_2"]


def _queue_in_slot(slot: int) -> str:
    """Return a queue name whose keys hash to *slot*."""
    for n in range(1_000_000):
        name = f"r_{n}"
        if key_slot(key_prefix(name).encode()) == slot:
            return name
    raise AssertionError(f"no queue name found for slot {slot}")  # pragma: no cover


def test_redis_cli_reshard_of_a_live_queues_slot_keeps_every_message_once_in_order(
    redis_cluster: RedisClusterServer,
) -> None:
    source, target = redis_cluster.primaries()[:2]
    first = min(first for first, _, port in _slot_ranges(source) if port == source)
    queue = _queue_in_slot(first)  # reshard moves a node's lowest slots first
    published: dict[str, list[int]] = {}
    refused: list[QueueMoving] = []
    with RedisTransport(_url(redis_cluster, queue)) as transport:
        for i in range(30):
            group = f"g{i % 3}"
            published.setdefault(group, []).append(transport.publish(group, Event(kind="k")))
        stop = threading.Event()

        def produce() -> None:  # publishes go on during the reshard
            i = 0
            while not stop.is_set():
                group = f"g{i % 3}"
                try:
                    message_id = transport.publish(group, Event(kind="k"))
                except QueueMoving as exc:
                    refused.append(exc)
                    continue
                published.setdefault(group, []).append(message_id)
                i += 1

        producer = threading.Thread(target=produce)
        producer.start()
        try:
            moved = _reshard_one_slot(source, target)
            assert moved.returncode == 0, moved.stdout[-500:] + moved.stderr[-500:]
            redis_cluster.wait_ok()
            time.sleep(0.2)  # publishes on the new node
        finally:
            stop.set()
            producer.join(30)
        assert redis_cluster.primary_of(first) == target
        assert _keys_of(source, first) == []
        assert _drain(transport) == published  # every message once, in order
        transport.purge()
    # Give the slot back for the other tests' view of the cluster.
    back = _reshard_one_slot(target, source)
    assert back.returncode == 0
    redis_cluster.wait_ok()


def _reshard_one_slot(source: int, target: int) -> subprocess.CompletedProcess[bytes]:
    """Move the lowest slot of *source* to *target* with ``redis-cli --cluster reshard``."""
    options = {
        "--cluster-from": _myid(source),
        "--cluster-to": _myid(target),
        "--cluster-slots": "1",
    }
    argv = [find_binaries()[1], "--cluster", "reshard", f"127.0.0.1:{source}"]
    for flag, value in options.items():
        argv += [flag, value]
    argv.append("--cluster-yes")
    return subprocess.run(argv, capture_output=True, timeout=60, check=False)


def _slot_ranges(port: int) -> list[tuple[int, int, int]]:
    node = _node(port)
    try:
        return [
            (int(r[0]), int(r[1]), int(r[2][1])) for r in node.execute_command("CLUSTER", "SLOTS")
        ]
    finally:
        node.close()
