"""How a one-off ``pgque`` command's Redis transport waits for a starting server
(``RedisBackend.command_options``): doubling retries that add up to the wait, which is also
the transport's connect timeout."""

from __future__ import annotations

import pytest

from pgque.redis import RedisBackend


@pytest.mark.parametrize(
    ("wait", "retries"),
    [(0.0, 0), (0.05, 1), (0.1, 2), (3.0, 6), (10.0, 10), (3600.0, 100)],
)
def test_retries_add_up_to_the_wait(wait: float, retries: int) -> None:
    assert RedisBackend.command_options is not None
    timeout = {"connect_timeout": wait} if wait else {}
    assert RedisBackend.command_options(wait, False) == {"retries": retries, **timeout}
    assert RedisBackend.command_options(wait, True) == {
        "retries": retries,
        "retry_refused": False,
        **timeout,
    }
