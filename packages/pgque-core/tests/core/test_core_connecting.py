"""Reaching a server: the connect timeout, the pauses between attempts, refused connections."""

from __future__ import annotations

import pytest

from pgque.core import InvalidInput
from pgque.core.connecting import (
    DEFAULT_CONNECT_TIMEOUT,
    Backoff,
    connect_timeout_of,
    refused,
    retries_within,
)


def test_the_connect_timeout_has_two_names_that_must_agree() -> None:
    assert connect_timeout_of(None, None) == DEFAULT_CONNECT_TIMEOUT == 10.0
    assert connect_timeout_of(3, None) == 3.0
    assert connect_timeout_of(None, 2.5) == 2.5
    assert connect_timeout_of(4, 4) == 4.0
    with pytest.raises(InvalidInput, match="name the same option"):
        connect_timeout_of(1, 2)
    with pytest.raises(InvalidInput):
        connect_timeout_of(None, -1)


def test_a_refused_connection_is_told_by_its_words() -> None:
    assert refused(OSError("Error 111 connecting to h:1. Connection refused."))
    assert refused(OSError("connection to server on socket ... failed: No such file or directory"))
    assert not refused(OSError("timeout expired"))


def test_pauses_double_up_to_the_longest_within_the_deadline() -> None:
    backoff = Backoff(60.0, 0.1, 0.3, retries=4)
    assert not backoff.late()
    assert not backoff.spent()
    assert [backoff.pause() for _ in range(4)] == [0.1, 0.2, 0.3, 0.3]
    assert backoff.spent()
    assert 59.0 < backoff.remaining <= 60.0
    assert Backoff(0.05, 0.1, 1.0).late()  # the first pause would end past the deadline
    assert not Backoff(0.05, 0.1, 1.0).spent()  # no retry count: only the deadline ends it


def test_retries_within_adds_up_the_pauses() -> None:
    assert retries_within(0, 0.05, 2.0) == 0
    assert retries_within(0.05, 0.05, 2.0) == 1
    assert retries_within(0.15, 0.05, 2.0) == 2  # 0.05 + 0.1
    assert retries_within(10.0, 0.05, 2.0) == 10  # 0.05 ... 1.6, then 2.0 each: 9.15 s, 11.15 s
    assert retries_within(1e9, 0.05, 2.0) == 100
