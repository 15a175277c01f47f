"""Query-text options: every backend reads them through pgque.core.url_options."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pgque.core import ConfigurationError
from pgque.core.settings import Settings
from pgque.core.url_options import (
    NOT_GIVEN,
    bounded_float,
    bounded_int,
    means_none,
    option_value,
    own_options,
    transport_options,
)
from pgque.core.validation import DEFAULT_MAX_ATTEMPTS


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("5", "int", 5),
        ("-3", "int", -3),
        ("2.5", "float", 2.5),
        ("1e3", "float", 1000.0),
        ("TRUE", "bool", True),
        ("off", "bool", False),
        ("0", "bool", False),
        ("none", "int_or_none", None),
        ("", "int_or_none", None),
        ("7", "int_or_none", 7),
    ],
)
def test_text_reads_as_its_kind(text: str, kind: str, value: object) -> None:
    assert option_value("x", text, kind) == value  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [5, 2.5, True, None, [1]])
def test_typed_values_pass_unchanged(value: object) -> None:
    assert option_value("x", value, "int") is value


@pytest.mark.parametrize(
    ("text", "kind", "message"),
    [
        ("five", "int", "option n must be an integer, not 'five'"),
        ("1.5", "int", "option n must be an integer, not '1.5'"),
        ("none", "int", "option n must be an integer, not 'none'"),
        ("fast", "float", "option n must be a number, not 'fast'"),
        ("maybe", "bool", "option n must be a boolean"),
    ],
)
def test_bad_text_is_a_configuration_error(text: str, kind: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        option_value("n", text, kind)  # type: ignore[arg-type]


def test_bounded_options_check_type_and_range() -> None:
    assert bounded_int("retries", "3", 0, 100) == 3
    assert bounded_int("retries", 100, 0, 100) == 100
    assert bounded_float("backoff", "0.5", 0.0, 10.0) == 0.5
    for bad in (-1, 101, True, 2.0, "x"):
        with pytest.raises(ConfigurationError, match="retries must be an integer"):
            bounded_int("retries", bad, 0, 100)
    for bad_f in (-0.1, 11, math.nan, math.inf, False, "x"):
        with pytest.raises(ConfigurationError, match="backoff must be a number"):
            bounded_float("backoff", bad_f, 0.0, 10.0)


@pytest.mark.parametrize(
    ("text", "none"), [("none", True), (" NONE ", True), ("", True), ("0", False)]
)
def test_the_url_and_the_settings_read_none_alike(
    monkeypatch: pytest.MonkeyPatch, text: str, none: bool
) -> None:
    assert means_none(text) is none
    assert (option_value("max_attempts", text, "int_or_none") is None) is none
    monkeypatch.setenv("PGQUE_MAX_ATTEMPTS", text if none else "3")
    assert (Settings(_env_file=None).max_attempts is None) is none  # type: ignore[call-arg]


def test_own_options_leave_the_rest_of_the_url_as_it_was() -> None:
    url, own = own_options("unix:///tmp/r.sock?db=2&queue=jobs&retries=3#f", {"queue", "retries"})
    assert url == "unix:///tmp/r.sock?db=2#f"
    assert own == {"queue": "jobs", "retries": "3"}
    with pytest.raises(ConfigurationError, match="given twice"):
        own_options("redis://h/?queue=a&queue=b", {"queue"})


def test_transport_options_take_keywords_over_the_url_over_the_defaults() -> None:
    common: dict[str, Any] = {
        "queue": None,
        "max_attempts": NOT_GIVEN,
        "on_exhausted": None,
        "clock": None,
    }
    defaults = transport_options({}, **common, max_event_bytes=None)
    assert (defaults.queue, defaults.max_attempts, defaults.on_exhausted) == (
        "default",
        DEFAULT_MAX_ATTEMPTS,
        "dead_letter",
    )
    own = {"queue": "q", "max_attempts": "none", "on_exhausted": "block", "max_event_bytes": "9"}
    from_url = transport_options(own, **common, max_event_bytes=None)
    assert (from_url.queue, from_url.max_attempts, from_url.on_exhausted) == ("q", None, "block")
    assert from_url.max_event_bytes == 9
    kept = transport_options(
        own, queue="k", max_attempts=3, on_exhausted="dead_letter", clock=None, max_event_bytes=7
    )
    assert (kept.queue, kept.max_attempts, kept.on_exhausted, kept.max_event_bytes) == (
        "k",
        3,
        "dead_letter",
        7,
    )
    with pytest.raises(ConfigurationError, match="max_attempts must be an integer from 1"):
        transport_options({"max_attempts": "0"}, **common, max_event_bytes=None)
