"""The input checks every transport runs before any I/O."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pgque.core import ErrorInfo, Event, InvalidInput, Lease, TransportOptions
from pgque.core.validation import (
    DEFAULT_MAX_ATTEMPTS,
    MAX_BATCH,
    MAX_GROUPS_PAGE,
    MAX_HOLDER_CHARS,
    MAX_VISIBILITY_S,
    check_after_id,
    check_batch_size,
    check_error,
    check_event,
    check_group_id,
    check_group_state,
    check_groups_page,
    check_holder,
    check_ids,
    check_items,
    check_lease,
    check_limit,
    check_message_id,
    check_priority,
    check_queue_name,
    check_reason,
    check_scheduled_page,
    check_seconds,
    check_text_id,
    exhausted_reason,
)


@pytest.mark.parametrize("group_id", ["a", "x" * 512, "é" * 256, "🦆" * 128, " a", "a/b:c"])
def test_group_id_accepted(group_id: str) -> None:
    assert check_group_id(group_id) == group_id


@pytest.mark.parametrize(
    "group_id",
    [
        "",
        " ",
        "\t \n",
        "\u3000",
        "x" * 513,
        "é" * 257,
        "🦆" * 129,
        "a\x00",
        "\ud800",
        1,
        None,
        b"g",
    ],
)
def test_group_id_refused(group_id: Any) -> None:
    with pytest.raises(InvalidInput):
        check_group_id(group_id)


@pytest.mark.parametrize("priority", [0, 1, 2, 3, 4])
def test_priority_accepted(priority: int) -> None:
    assert check_priority(priority) == priority


@pytest.mark.parametrize("priority", [-1, 5, 1.0, "1", True, False, None])
def test_priority_refused(priority: Any) -> None:
    with pytest.raises(InvalidInput, match="min_priority"):
        check_priority(priority, "min_priority")


@pytest.mark.parametrize("value", [0, 0.0, 1, 2.5, MAX_VISIBILITY_S])
def test_seconds_accepted(value: float) -> None:
    result = check_seconds(value, "visibility")
    assert result == float(value)
    assert isinstance(result, float)


@pytest.mark.parametrize(
    "value", [-1, -1e-9, math.nan, math.inf, -math.inf, MAX_VISIBILITY_S + 1, "1", None, True]
)
def test_seconds_refused(value: Any) -> None:
    with pytest.raises(InvalidInput, match="delay"):
        check_seconds(value, "delay")


def test_batch_size_and_limit() -> None:
    assert check_batch_size(1) == 1
    assert check_batch_size(MAX_BATCH) == MAX_BATCH
    assert check_limit(100) == 100
    for bad in (0, -1, MAX_BATCH + 1, 1.0, "2", True, None):
        with pytest.raises(InvalidInput):
            check_batch_size(bad)
        with pytest.raises(InvalidInput):
            check_limit(bad)


def test_ids() -> None:
    assert check_ids(None) is None
    assert check_ids([3, 1]) == [3, 1]
    assert check_ids(x for x in [5]) == [5]
    for bad in ("12", b"1", 5, [1.0], [True], ["1"]):
        with pytest.raises(InvalidInput):
            check_ids(bad)


def test_event_check_returns_json() -> None:
    event = Event(kind="k", data=[1])
    assert check_event(event) == event.to_json()
    for bad in ({"kind": "k"}, None, "k", Event.model_construct(kind="k", data=math.nan)):
        with pytest.raises(InvalidInput):
            check_event(bad)


def test_items() -> None:
    event = Event(kind="k")
    assert check_items([("g", event)]) == [("g", event, event.to_json())]
    assert check_items([]) == []
    assert check_items(iter([("a", event), ("b", event)]))[1][0] == "b"
    for bad in ("gs", None, [("g",)], [["g", event]], [("", event)], [("g", "not an event")]):
        with pytest.raises(InvalidInput):
            check_items(bad)
    with pytest.raises(InvalidInput, match="at most"):
        check_items([("g", event)] * (MAX_BATCH + 1))


def test_reason() -> None:
    assert check_reason("") == ""
    assert check_reason("r" * 2000) == "r" * 2000
    for bad in ("r" * 2001, "a\x00b", None, 1):
        with pytest.raises(InvalidInput):
            check_reason(bad)


@pytest.mark.parametrize("name", ["a", "orders", "q_1", "a" + "b" * 63, "Orders", "a-b", "a.b"])
def test_queue_name_accepted(name: str) -> None:
    assert check_queue_name(name) == name


@pytest.mark.parametrize(
    "name", ["", "1a", "_a", "-a", "a b", "a" * 65, "ü", "a;drop", "a:b", "a}", None, 5]
)
def test_queue_name_refused(name: Any) -> None:
    with pytest.raises(InvalidInput):
        check_queue_name(name)


def test_lease_check() -> None:
    lease = Lease(
        group_id="g",
        message_id=1,
        event=Event(kind="k"),
        token="t",
        priority=0,
        attempt=1,
        expires_at=0.0,
        queue="q",
        origin="o",
    )
    assert check_lease(lease, "q", "o") is lease
    with pytest.raises(InvalidInput, match="queue 'q'"):
        check_lease(lease, "other", "o")
    with pytest.raises(InvalidInput):
        check_lease(lease, "q", "other-store")
    with pytest.raises(InvalidInput):
        check_lease(lease.model_dump(), "q", "o")


def test_transport_options() -> None:
    options = TransportOptions()
    assert (options.queue, options.max_attempts, options.on_exhausted) == (
        "default",
        DEFAULT_MAX_ATTEMPTS,
        "dead_letter",
    )
    assert DEFAULT_MAX_ATTEMPTS == 10
    assert TransportOptions(max_attempts=None).max_attempts is None
    assert TransportOptions(max_attempts=1, on_exhausted="block").max_attempts == 1
    bad: list[dict[str, Any]] = [
        {"queue": "Bad name"},
        {"max_attempts": 0},
        {"max_attempts": True},
        {"max_attempts": "3"},
        {"on_exhausted": "drop"},
        {"clock": 5},
    ]
    for fields in bad:
        with pytest.raises(InvalidInput):
            TransportOptions(**fields)


def test_check_text_id_is_the_one_identifier_rule() -> None:
    assert check_text_id("ünï", "key", 6) == "ünï"
    assert check_text_id("", "key", 6, empty_ok=True) == ""
    refused = [
        (5, {}, "key must be a str, not int"),
        (5, {"expected": "a str or None"}, "key must be a str or None, not int"),
        ("", {}, "key must not be empty"),
        ("a\x00b", {}, "key must not contain NUL"),
        ("\ud800", {}, "key must be valid Unicode"),
        ("ünïcc", {}, "key is 7 bytes; the limit is 6"),
    ]
    for value, options, message in refused:
        with pytest.raises(InvalidInput, match=message):
            check_text_id(value, "key", 6, **options)  # type: ignore[arg-type]


# -- the group API's checks (issue 14) ------------------------------------------------------


def test_check_holder() -> None:
    assert check_holder(None) is None
    assert check_holder("host:12:0") == "host:12:0"
    assert check_holder("") is None  # an empty label is no label
    assert check_holder("h" * MAX_HOLDER_CHARS) == "h" * MAX_HOLDER_CHARS
    assert check_holder("é" * MAX_HOLDER_CHARS) == "é" * MAX_HOLDER_CHARS
    bad: list[Any] = [5, b"h", ["h"], "h" * (MAX_HOLDER_CHARS + 1), "a\x00b", "h\ud800"]
    for value in bad:
        with pytest.raises(InvalidInput):
            check_holder(value)


def test_check_group_state() -> None:
    assert check_group_state(None) is None
    for state in ("ready", "leased", "parked", "blocked", "paused"):
        assert check_group_state(state) == state
    bad: list[Any] = ["stuck", "READY", "", 0, True, ["ready"], b"ready"]
    for value in bad:
        with pytest.raises(InvalidInput, match="state must be one of"):
            check_group_state(value)


def test_check_groups_page() -> None:
    assert check_groups_page(None, 100, None) == (None, 100, None)
    assert check_groups_page("paused", 1, "g") == ("paused", 1, "g")
    assert check_groups_page(None, MAX_GROUPS_PAGE, "x" * 512) == (None, MAX_GROUPS_PAGE, "x" * 512)
    bad_limits: list[Any] = [0, -1, MAX_GROUPS_PAGE + 1, 1.0, True, "5", None]
    for limit in bad_limits:
        with pytest.raises(InvalidInput, match="limit"):
            check_groups_page(None, limit, None)
    bad_afters: list[Any] = ["", 5, b"g", "a\x00b", "x" * 513, "g\ud800"]
    for after in bad_afters:
        with pytest.raises(InvalidInput):
            check_groups_page(None, 10, after)
    with pytest.raises(InvalidInput):
        check_groups_page("stuck", 10, None)


def test_check_after_id() -> None:
    assert check_after_id(None) is None
    assert check_after_id(0) == 0
    assert check_after_id(-3) == -3
    assert check_after_id(2**63) == 2**63
    bad: list[Any] = ["5", 1.5, True, b"1", [1]]
    for value in bad:
        with pytest.raises(InvalidInput, match="after"):
            check_after_id(value)


def test_check_message_id() -> None:
    assert check_message_id(1) == 1
    assert check_message_id(2**63) == 2**63
    bad: list[Any] = [0, -1, True, False, 1.0, "1", None, [1], math.nan]
    for value in bad:
        with pytest.raises(InvalidInput, match="message_id"):
            check_message_id(value)


def test_check_scheduled_page() -> None:
    assert check_scheduled_page(100, None) == (100, None)
    assert check_scheduled_page(1, 0) == (1, 0)
    assert check_scheduled_page(MAX_GROUPS_PAGE, -7) == (MAX_GROUPS_PAGE, -7)
    bad_limits: list[Any] = [0, -1, MAX_GROUPS_PAGE + 1, 1.0, True, "5", None]
    for limit in bad_limits:
        with pytest.raises(InvalidInput, match="limit"):
            check_scheduled_page(limit, None)
    bad_afters: list[Any] = ["5", 1.5, True, b"1", [1]]
    for after in bad_afters:
        with pytest.raises(InvalidInput, match="after"):
            check_scheduled_page(10, after)


def test_check_error() -> None:
    assert check_error(None, 1.0) is None
    text = check_error("boom", 2.0)
    assert text == ErrorInfo(type="error", message="boom", at=2.0)
    exc = check_error(ValueError("v"), 3.0)
    assert exc is not None
    assert (exc.type, exc.message, exc.at) == ("ValueError", "v", 3.0)
    record = ErrorInfo(type="T" * 300, message="m", at=9.0)
    bounded = check_error(record, 4.0)
    assert bounded == record.bounded()
    assert bounded is not None
    assert bounded.at == 9.0  # a record keeps its own time
    bad: list[Any] = [5, b"boom", object(), ["e"], {"type": "e"}]
    for value in bad:
        with pytest.raises(InvalidInput, match="error must be"):
            check_error(value, 1.0)


def test_exhausted_reason_names_the_limit() -> None:
    assert exhausted_reason(10) == "max_attempts (10) exhausted"
    assert "max_attempts" in exhausted_reason(DEFAULT_MAX_ATTEMPTS)
