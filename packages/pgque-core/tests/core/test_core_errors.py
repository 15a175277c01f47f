"""The exception hierarchy: one root, docstrings as default messages."""

from __future__ import annotations

import pickle

import pytest

from pgque.core import (
    ConfigurationError,
    ConnectionLost,
    InvalidInput,
    PgqueError,
    SchemaMismatch,
    TransportClosed,
)

ALL = [ConfigurationError, ConnectionLost, InvalidInput, SchemaMismatch, TransportClosed]


@pytest.mark.parametrize("kind", ALL)
def test_every_error_is_a_pgque_error(kind: type[PgqueError]) -> None:
    assert issubclass(kind, PgqueError)
    error = kind()
    assert str(error) == (kind.__doc__ or "").strip()
    assert str(error)
    assert str(kind("custom")) == "custom"


def test_invalid_input_is_a_value_error() -> None:
    assert issubclass(InvalidInput, ValueError)
    with pytest.raises(ValueError):
        raise InvalidInput("bad")


def test_root_message() -> None:
    assert str(PgqueError()) == "A pgque operation failed."


def test_connection_lost_says_whether_the_write_may_have_been_applied() -> None:
    assert ConnectionLost("refused").maybe_applied is False
    assert ConnectionLost().maybe_applied is False
    cut = ConnectionLost("cut after sending", maybe_applied=True)
    assert cut.maybe_applied is True
    assert str(cut) == "cut after sending"
    # Errors cross process boundaries (worker processes): the flag must survive pickling.
    back = pickle.loads(pickle.dumps(cut))
    assert type(back) is ConnectionLost
    assert back.maybe_applied is True
    assert str(back) == "cut after sending"
