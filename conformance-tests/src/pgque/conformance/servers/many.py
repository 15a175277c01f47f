"""Several throwaway PostgreSQL servers at once: the shards of a sharded test run.

Each is a :class:`~pgque.conformance.servers.restartable.ThrowawayPostgres` (its own
``initdb`` cluster in a temporary folder, on a free port of 127.0.0.1), so a test may also
stop, start or restart any one of them. They start in parallel and are all removed by
:meth:`PostgresServers.stop`, also when one fails to start.
"""

from __future__ import annotations

import concurrent.futures
from types import TracebackType

from pgque.conformance.servers.restartable import ThrowawayPostgres

__all__ = ["PostgresServers"]


class PostgresServers:
    """*count* throwaway PostgreSQL clusters (initdb) on distinct free loopback ports.

    Use as a context manager, or call :meth:`start` and, always, :meth:`stop`. Raises
    ValueError for a *count* below 1; :meth:`start` raises what a failed start raised.
    """

    def __init__(self, count: int) -> None:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be an int of at least 1, not {count!r}")
        self.servers: list[ThrowawayPostgres] = []
        ports: set[int] = set()
        while len(self.servers) < count:
            server = ThrowawayPostgres()
            if server.port in ports:  # two probes may get the same free port back
                server.stop()
                continue
            ports.add(server.port)
            self.servers.append(server)

    @property
    def urls(self) -> list[str]:
        """Each server's superuser URL, in order."""
        return [server.url for server in self.servers]

    def start(self) -> list[str]:
        """Create and start every cluster (in parallel); return their URLs."""
        with concurrent.futures.ThreadPoolExecutor(len(self.servers)) as pool:
            futures = [pool.submit(server.start) for server in self.servers]
            errors = [f.exception() for f in futures if f.exception() is not None]
        if errors:
            self.stop()
            raise errors[0]  # type: ignore[misc]
        return self.urls

    def stop(self) -> None:
        """Stop every server and remove its folder; never raises."""
        for server in self.servers:
            server.stop()

    def __enter__(self) -> PostgresServers:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
