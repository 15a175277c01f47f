"""The conformance suite on a real Redis Cluster: the transports open the ``redis+cluster://``
URL of the conformance plugin's six-node ``redis_cluster`` (``nox -s
conformance-redis-cluster``).

Two fixtures of the package's conftest are overridden: ``redis_url`` is the cluster URL (so
its transport factories open the cluster), and the keys of each test's queues are deleted
through a cluster client.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pgque.conformance.servers.redis_cluster import RedisClusterServer


@pytest.fixture(scope="session")
def raw_client(redis_cluster: RedisClusterServer) -> Iterator[Any]:
    """Return a cluster client (for inspecting and deleting a test's keys)."""
    client = redis_cluster.client()
    yield client
    client.close()


@pytest.fixture(scope="session")
def redis_url(redis_cluster_url: str) -> str:
    """The cluster's ``redis+cluster://`` URL: the package's transport factories open it."""
    return redis_cluster_url
