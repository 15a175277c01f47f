"""ErrorInfo: how a failure is recorded, and the bounds it is stored within."""

from __future__ import annotations

import pytest

from pgque.core import ErrorInfo, InvalidInput
from pgque.core.models import (
    ERROR_MESSAGE_CHARS,
    ERROR_TRACEBACK_CHARS,
    ERROR_TYPE_CHARS,
)

CUT = "[...cut...]"


class PaymentDeclined(Exception):
    """An application's exception."""


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_a_builtin_exception_is_named_plainly() -> None:
    info = ErrorInfo.capture(_raised(ValueError("bad sku")), 12.5)
    assert (info.type, info.message, info.at) == ("ValueError", "bad sku", 12.5)
    assert info.traceback is not None
    assert info.traceback.startswith("Traceback (most recent call last)")
    assert info.traceback.rstrip().endswith("ValueError: bad sku")
    assert "_raised" in info.traceback


def test_an_application_exception_is_module_qualified() -> None:
    info = ErrorInfo.capture(PaymentDeclined("card"), 1.0)
    assert info.type == f"{__name__}.PaymentDeclined"
    assert info.traceback is None  # never raised: no traceback to keep


def test_a_nested_class_keeps_its_qualified_name() -> None:
    class Inner(Exception):
        pass

    info = ErrorInfo.capture(Inner("x"), 1.0)
    assert info.type.startswith(f"{__name__}.")
    assert info.type.endswith("Inner")


def test_a_plain_string_is_an_error_without_traceback() -> None:
    info = ErrorInfo.capture("upstream 503", 3.0)
    assert (info.type, info.message, info.traceback, info.at) == (
        "error",
        "upstream 503",
        None,
        3.0,
    )


def test_an_unprintable_exception_is_still_recorded() -> None:
    info = ErrorInfo.capture(_raised(Unprintable()), 1.0)
    assert info.type == f"{__name__}.Unprintable"
    assert info.message == "<unprintable Unprintable>"


def test_anything_else_is_refused() -> None:
    with pytest.raises(InvalidInput):
        ErrorInfo.capture(5, 1.0)  # type: ignore[arg-type]


def test_a_long_type_and_message_keep_their_start() -> None:
    record = ErrorInfo(type="T" * 500 + "end", message="M" * 5000 + "end", at=1.0).bounded()
    assert len(record.type) == ERROR_TYPE_CHARS
    assert record.type.startswith("TTT")
    assert record.type.endswith(CUT)
    assert len(record.message) == ERROR_MESSAGE_CHARS
    assert record.message.startswith("MMM")
    assert record.message.endswith(CUT)
    text = ErrorInfo.capture("S" * 3000, 1.0).message
    assert len(text) == ERROR_MESSAGE_CHARS
    assert text.endswith(CUT)


def test_a_long_traceback_keeps_its_end() -> None:
    exc = _raised(RuntimeError("START " + "m" * 100_000 + " END"))
    info = ErrorInfo.capture(exc, 1.0)
    assert info.traceback is not None
    assert len(info.traceback) == ERROR_TRACEBACK_CHARS
    assert info.traceback.startswith(CUT)
    assert info.traceback.rstrip().endswith("m END")
    assert info.message.startswith("START mmm")
    assert len(info.message) == ERROR_MESSAGE_CHARS


def test_values_within_the_bounds_are_kept_whole() -> None:
    record = ErrorInfo(
        type="T" * ERROR_TYPE_CHARS,
        message="M" * ERROR_MESSAGE_CHARS,
        traceback="B" * ERROR_TRACEBACK_CHARS,
        at=2.0,
    )
    assert record.bounded() == record


def test_text_that_no_store_takes_is_replaced() -> None:
    info = ErrorInfo.capture("a\x00b\ud800c", 1.0)
    assert "\x00" not in info.message
    info.message.encode("utf-8")  # no lone surrogate left
    assert (info.message[0], info.message[-1]) == ("a", "c")


def test_json_round_trip_and_summary() -> None:
    info = ErrorInfo.capture(_raised(KeyError("k")), 7.25)
    assert ErrorInfo.from_json(info.to_json()) == info
    assert info.summary() == "KeyError: 'k'"
    assert ErrorInfo(type="error", message="", at=1.0).summary() == "error"
    assert ErrorInfo(type="error", message="one\ntwo", at=1.0).summary() == "error: one"
    with pytest.raises(InvalidInput):
        ErrorInfo.from_json("{not json")
    with pytest.raises(InvalidInput):
        ErrorInfo.from_json('{"type": "x"}')
