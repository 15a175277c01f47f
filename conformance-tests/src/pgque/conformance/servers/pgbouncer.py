"""A throwaway PgBouncer in front of the test PostgreSQL server, for the pooler tests.

:class:`PgBouncer` writes a configuration into a temporary folder, starts ``pgbouncer`` on a
free port of 127.0.0.1 in front of an upstream server (by default in ``pool_mode =
transaction``, ``auth_type = trust`` with a userlist naming the upstream's user) and stops it
and removes the folder on :meth:`PgBouncer.stop`. Every database name is routed to the upstream
server (a ``*`` entry), so tests that create databases of their own reach them too. When run as
root, PgBouncer (which refuses to run as root) is started as the unprivileged user ``nobody``,
or as the owner of the upstream's Unix socket directory (the embedded server's user).

The binary is ``PGQUE_TEST_PGBOUNCER_BIN``, ``pgbouncer`` on the ``PATH`` or
``/usr/sbin/pgbouncer`` (Debian's package); when none is there :func:`find_pgbouncer` raises
:class:`Unavailable` with one line saying what to install. :func:`shared_pgbouncer` starts one
per process and upstream (the pytest plugin's ``pgbouncer_url``), stopped when the process exits.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Literal
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

__all__ = [
    "PGBOUNCER_BIN_ENV",
    "INSTALL_HINT",
    "Unavailable",
    "PgBouncer",
    "shared_pgbouncer",
    "find_pgbouncer",
    "pgbouncer_version",
]

#: The environment variable naming the pgbouncer binary to use.
PGBOUNCER_BIN_ENV = "PGQUE_TEST_PGBOUNCER_BIN"

#: What to install when the binary is missing (one line).
INSTALL_HINT = (
    "pgbouncer is not installed: apt-get install pgbouncer (Debian/Ubuntu), "
    "brew install pgbouncer (macOS), or set PGQUE_TEST_PGBOUNCER_BIN"
)

PoolMode = Literal["session", "transaction", "statement"]

#: The user PgBouncer runs as when the tests run as root (it refuses to run as root).
_UNPRIVILEGED = "nobody"


class Unavailable(RuntimeError):
    """The pgbouncer binary is missing, or it could not be started."""


def find_pgbouncer() -> str:
    """Return the path of the pgbouncer binary; raise Unavailable (INSTALL_HINT) if missing."""
    named = os.environ.get(PGBOUNCER_BIN_ENV)
    if named:
        if not os.access(named, os.X_OK):
            raise Unavailable(f"{PGBOUNCER_BIN_ENV}={named} is not an executable file")
        return named
    found = shutil.which("pgbouncer")
    if found:
        return found
    debian = "/usr/sbin/pgbouncer"  # not on a non-root user's PATH
    if os.access(debian, os.X_OK):
        return debian
    raise Unavailable(INSTALL_HINT)


def pgbouncer_version(binary: str | None = None) -> tuple[int, int, int]:
    """Return the version of the pgbouncer binary as (major, minor, patch)."""
    out = subprocess.run(
        [binary or find_pgbouncer(), "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    ).stdout
    match = re.search(r"PgBouncer (\d+)\.(\d+)(?:\.(\d+))?", out)
    if match is None:
        raise Unavailable(f"cannot read the version of pgbouncer from {out!r}")
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _quote_value(value: str) -> str:
    """Quote a value of a PgBouncer connection string (libpq's key='value' form)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class PgBouncer:
    """A PgBouncer of its own in front of the PostgreSQL server named by *upstream_url*.

    *pool_mode* is PgBouncer's (``transaction`` by default: a server connection is lent to a
    client for one transaction); *pool_size* is ``default_pool_size`` (server connections per
    database and user). :attr:`url` is *upstream_url* with its host and port replaced by the
    bouncer's (the path, user, password and query are kept). Use it as a context manager, or
    call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        upstream_url: str,
        *,
        pool_mode: PoolMode = "transaction",
        pool_size: int = 20,
        binary: str | None = None,
    ) -> None:
        self.upstream_url = upstream_url
        self.pool_mode: PoolMode = pool_mode
        self.pool_size = pool_size
        self.binary = binary
        self.port = 0
        self.folder: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The URL that reaches the upstream server through this bouncer (after start)."""
        if not self.port:
            raise RuntimeError("the PgBouncer is not started")
        parts = urlsplit(self.upstream_url)
        auth = ""
        if parts.username:
            auth = quote(unquote(parts.username), safe="")
            if parts.password is not None:
                auth += ":" + quote(unquote(parts.password), safe="")
            auth += "@"
        query = [(k, v) for k, v in parse_qsl(parts.query) if k not in {"host", "port"}]
        query_text = "&".join(f"{k}={quote(v, safe='')}" for k, v in query)
        netloc = f"{auth}127.0.0.1:{self.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, query_text, ""))

    def _config(self, folder: Path) -> str:
        parts = urlsplit(self.upstream_url)
        query = dict(parse_qsl(parts.query))
        # From the netloc as written: urlsplit's hostname lowercases, which would change the
        # path of a socket directory written there (postgresql://user@%2Ftmp%2FDir/db).
        written = parts.netloc.rpartition("@")[2]
        if written.startswith("["):
            address, _, port_text = written[1:].partition("]")
            port_text = port_text.lstrip(":")
        else:
            address, _, port_text = written.partition(":")
        host = query.get("host") or unquote(address) or "127.0.0.1"
        port = query.get("port") or port_text or "5432"
        user = unquote(parts.username) if parts.username else "postgres"
        password = unquote(parts.password) if parts.password else ""
        # trust: clients are not asked for a password, but their user must be in the userlist;
        # PgBouncer logs in to the server with the password written there.
        userlist = folder / "userlist.txt"
        userlist.write_text(f'"{user}" "{password}"\n', encoding="utf-8")
        target = f"host={_quote_value(host)} port={port}"
        return "\n".join(
            [
                "[databases]",
                f"* = {target}",
                "",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {self.port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {userlist}",
                f"admin_users = {user}",
                f"pool_mode = {self.pool_mode}",
                f"default_pool_size = {self.pool_size}",
                "max_client_conn = 1000",
                "ignore_startup_parameters = extra_float_digits",
                "log_connections = 0",
                "log_disconnections = 0",
                f"logfile = {folder / 'pgbouncer.log'}",
                f"pidfile = {folder / 'pgbouncer.pid'}",
                "",
            ]
        )

    def _run_as(self) -> str:
        """The user PgBouncer runs as under root: the owner of the upstream's socket directory
        (a data directory only its owner may enter, as the embedded server's), else nobody."""
        import pwd  # POSIX only, as is running as root

        parts = urlsplit(self.upstream_url)
        host = dict(parse_qsl(parts.query)).get("host") or unquote(
            parts.netloc.rpartition("@")[2].partition(":")[0]
        )
        if host.startswith("/"):
            with contextlib.suppress(OSError, KeyError):
                owner = os.stat(host).st_uid
                if owner != 0:
                    return pwd.getpwuid(owner).pw_name
        return _UNPRIVILEGED

    def start(self, timeout: float = 10.0) -> str:
        """Start PgBouncer and wait until it accepts connections; return :attr:`url`.

        Raises Unavailable when the binary is missing or PgBouncer does not come up in time
        (with the tail of its log).
        """
        binary = self.binary or find_pgbouncer()
        folder = Path(tempfile.mkdtemp(prefix="pgque-pgbouncer-"))
        self.folder = folder
        self.port = _free_port()
        config = folder / "pgbouncer.ini"
        config.write_text(self._config(folder), encoding="utf-8")
        command = [binary, "-q"]  # -q: no console log (it goes to logfile)
        if os.geteuid() == 0:
            import pwd  # POSIX only, as is running as root

            entry = pwd.getpwnam(self._run_as())
            os.chmod(folder, 0o755)
            for path in (folder, *folder.iterdir()):
                os.chown(path, entry.pw_uid, entry.pw_gid)
            command += ["-u", entry.pw_name]
        # What it still prints goes to a file: a pipe nobody reads would fill up and stop it.
        with open(folder / "console.log", "wb") as console:
            self._process = subprocess.Popen(
                [*command, str(config)], stdout=console, stderr=console, stdin=subprocess.DEVNULL
            )
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                break
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5),
            ):
                return self.url
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        detail = self._log_tail()
        self.stop()
        raise Unavailable(f"pgbouncer did not start: {detail}")

    def _log_tail(self) -> str:
        lines: list[str] = []
        if self.folder is not None:
            for name in ("console.log", "pgbouncer.log"):
                log = self.folder / name
                if log.exists():
                    lines += log.read_text(errors="replace").splitlines()
        return " | ".join(lines[-5:]) or "no output"

    def stop(self) -> None:
        """Stop PgBouncer (its client connections are cut) and remove its folder. Idempotent."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        folder, self.folder = self.folder, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def __enter__(self) -> PgBouncer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


_shared: dict[str, PgBouncer] = {}
_shared_lock = threading.Lock()


def shared_pgbouncer(upstream_url: str) -> PgBouncer:
    """Return this process's PgBouncer (transaction pooling) in front of *upstream_url*.

    Started on the first call, stopped when the process exits. Raises Unavailable as
    :meth:`PgBouncer.start` does.
    """
    with _shared_lock:
        bouncer = _shared.get(upstream_url)
        if bouncer is None:
            bouncer = PgBouncer(upstream_url, pool_mode="transaction")
            bouncer.start()
            atexit.register(bouncer.stop)
            _shared[upstream_url] = bouncer
        return bouncer
