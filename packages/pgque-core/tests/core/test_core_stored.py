"""pgque.core.stored: stored events and errors read back, the stand-ins for text that does not
decode, the reason of an undecodable head, and an error's stored JSON (its time left to the
store's clock)."""

from __future__ import annotations

import json

import pytest

from pgque.core import ErrorInfo, Event, InvalidInput, KeyPolicy
from pgque.core.models import ERROR_MESSAGE_CHARS
from pgque.core.stored import (
    GROUP_FIELDS,
    SHOWN_CHARS,
    UNDECODABLE_KIND,
    UNDECODABLE_REASON,
    claimed_lease,
    dead_letter,
    decode_error,
    decode_event,
    decode_policy,
    encode_policy,
    error_json,
    error_json_head,
    group_info,
    history_record,
    key_info,
    queue_stats,
    readable,
    reply_text,
    scheduled_message,
    stand_in_error,
    stand_in_event,
    undecodable_reason,
)
from pgque.core.validation import MAX_REASON_CHARS

#: Event JSON nested deeper than the decoder's recursion limit: json raises RecursionError.
DEEP = '{"kind": "x", "data": ' + "[" * 5000 + "]" * 5000 + "}"


def test_readable_escapes_bytes_that_are_not_utf8() -> None:
    assert readable(b"caf\xc3\xa9") == "café"
    assert readable(b"\xff\xfe{") == "\\xff\\xfe{"
    assert readable("as it is") == "as it is"
    assert readable(17) == "17"


@pytest.mark.parametrize("raw", [Event(kind="k", data={"a": 1}).to_json()])
def test_decode_event_reads_str_and_utf8_bytes(raw: str) -> None:
    assert decode_event(raw) == Event.from_json(raw)
    assert decode_event(raw.encode("utf-8")) == Event.from_json(raw)


@pytest.mark.parametrize(
    "raw",
    ["{not json", '{"kind": ""}', "[1, 2]", DEEP, b"\xff\xfe{", '{"kind": "k"}'.encode("utf-16")],
)
def test_text_that_is_not_event_json_shows_a_stand_in_with_the_text_and_the_error(
    raw: str | bytes,
) -> None:
    event = decode_event(raw)
    assert event.kind == UNDECODABLE_KIND
    assert isinstance(event.data, dict)
    assert event.data["text"] == readable(raw)[:SHOWN_CHARS]
    assert event.data["error"]  # why it did not decode


def test_a_stand_in_event_cuts_the_text_and_the_error() -> None:
    event = stand_in_event("x" * (SHOWN_CHARS + 10), "e" * (MAX_REASON_CHARS + 10))
    assert isinstance(event.data, dict)
    assert event.data == {"text": "x" * SHOWN_CHARS, "error": "e" * MAX_REASON_CHARS}
    assert Event.from_json(event.to_json()) == event  # a stand-in is a valid event itself


def test_decode_error_reads_a_stored_record_and_none() -> None:
    info = ErrorInfo(type="ValueError", message="bad", traceback="tb", at=12.5)
    assert decode_error(info.to_json()) == info
    assert decode_error(info.to_json().encode("utf-8")) == info
    assert decode_error(None) is None


@pytest.mark.parametrize("raw", ["oops", "", '{"type": "x"}', b"\xffoops", DEEP])
def test_a_stored_error_that_is_no_error_info_shows_a_stand_in(raw: str | bytes) -> None:
    shown = decode_error(raw)
    assert shown == stand_in_error(raw)
    assert shown is not None
    assert (shown.type, shown.at) == (UNDECODABLE_KIND, 0.0)
    assert shown.message[:100] == readable(raw)[:100]  # quoting the text (cut when long)


def test_a_stand_in_error_is_bounded_as_error_info_is() -> None:
    shown = stand_in_error("m" * (ERROR_MESSAGE_CHARS * 2))
    assert len(shown.message) <= ERROR_MESSAGE_CHARS
    assert shown.message.startswith("m" * 100)
    assert shown.message.endswith("[...cut...]")


def test_the_undecodable_reason_names_the_error_on_one_line() -> None:
    reason = undecodable_reason(InvalidInput("event JSON\nmust be\tan object\x00!"))
    assert reason == f"{UNDECODABLE_REASON}: InvalidInput: event JSON must be an object!"


def test_the_undecodable_reason_is_cut_to_the_reason_bound() -> None:
    reason = undecodable_reason(ValueError("v" * 10_000))
    assert len(reason) == MAX_REASON_CHARS
    assert reason.startswith("undecodable event: ValueError: vvv")


def test_error_json_is_the_record_s_json_or_its_time_left_to_the_store() -> None:
    info = ErrorInfo(type="T", message='é "quoted"', traceback=None, at=1700000000.125)
    assert error_json(info) == info.to_json()
    stored = json.loads(error_json(info, store_clock=True))
    assert stored == {"type": "T", "message": 'é "quoted"', "traceback": None, "at": None}
    assert error_json(info, store_clock=True) == info.to_json().replace("1700000000.125", "null")


def test_error_json_head_ends_before_the_time() -> None:
    info = ErrorInfo(type="T", message="m", traceback="tb", at=3.0)
    head = error_json_head(info)
    assert head.endswith('"at":')
    assert head + "3.0}" == info.to_json()
    assert ErrorInfo.from_json(head + "42.5}").at == 42.5


def test_reply_text_decodes_bytes_strictly() -> None:
    assert reply_text(b"ab") == reply_text("ab") == "ab"
    assert reply_text(7) == "7"
    with pytest.raises(UnicodeDecodeError):
        reply_text(b"\xff")


@pytest.mark.parametrize(
    "fields",
    [
        ("g", 3, Event(kind="k").to_json(), "t", 2, 1, 9.5),
        (b"g", b"3", Event(kind="k").to_json().encode(), b"t", b"2", b"1", b"9.5"),
    ],
)
def test_a_claimed_head_decodes_into_a_lease(fields: tuple[object, ...]) -> None:
    lease = claimed_lease(fields, "q", "memory:x")
    assert not isinstance(lease, str)
    assert (lease.group_id, lease.message_id, lease.event.kind, lease.token) == ("g", 3, "k", "t")
    assert (lease.priority, lease.attempt, lease.expires_at) == (2, 1, 9.5)
    assert (lease.queue, lease.origin) == ("q", "memory:x")


@pytest.mark.parametrize(
    "fields",
    [
        ("g", 3, "not json", "t", 0, 1, 9.5),
        ("g", 3, DEEP, "t", 0, 1, 9.5),
        (b"\xff", b"3", Event(kind="k").to_json(), b"t", b"0", b"1", b"9.5"),
        (b"g", b"x", Event(kind="k").to_json(), b"t", b"0", b"1", b"9.5"),
    ],
)
def test_a_claimed_head_that_does_not_decode_gives_its_reason(fields: tuple[object, ...]) -> None:
    reason = claimed_lease(fields, "q", "memory:x")
    assert isinstance(reason, str)
    assert reason.startswith(UNDECODABLE_REASON + ": ")


def test_records_decode_into_their_models_with_their_stored_texts() -> None:
    values = ("g", "parked", 2, 1, 5, 1.0, 1, None, None, 3.0)
    info = group_info((*values, "not json", ""))
    expected = dict(zip(GROUP_FIELDS, values, strict=True))
    assert info.model_dump(include=set(GROUP_FIELDS)) == expected
    assert info.last_error is not None
    assert info.last_error.type == UNDECODABLE_KIND
    assert info.fairness_key is None
    assert group_info((*values, None, "k")).fairness_key == "k"
    letter = dead_letter((1, "g", 2, "{", 0, 3, "why", 4.0, None))
    assert (letter.event.kind, letter.error, letter.reason) == (UNDECODABLE_KIND, None, "why")
    key = key_info(("k", True, 2.0, 5, None, 1.0, None, 1, 2, 3, 0.5, None, None))
    assert (key.policy.weight, key.policy.max_in_flight, key.own_policy) == (2.0, 5, True)
    stats = queue_stats((1, 2, 0, 0, 0, 0, None, None, 0, 0, None))
    assert (stats.groups, stats.messages) == (1, 2)


@pytest.mark.parametrize(
    "policy",
    [KeyPolicy(), KeyPolicy(weight=0.1, max_in_flight=3, rate=2.5, per=60, burst=4)],
)
def test_a_policy_reads_back_from_its_text(policy: KeyPolicy) -> None:
    text = encode_policy(policy)
    assert decode_policy(text) == decode_policy(text.encode()) == policy
    assert decode_policy("") is decode_policy(None) is None


def test_a_history_record_reads_its_key_and_error_back() -> None:
    error = json.dumps({"type": "E", "message": "m", "traceback": "", "at": 3.0})
    fields = [7, 5, "g", "k", "", "acked", 2, 1.0, 2.0, 3.0, "w", None, None]
    plain = history_record(fields)
    assert (plain.id, plain.message_id, plain.fairness_key, plain.error) == (7, 5, None, None)
    keyed = history_record([*fields[:4], "tenant", "nacked", *fields[6:11], error, "why"])
    assert (keyed.fairness_key, keyed.outcome, keyed.reason) == ("tenant", "nacked", "why")
    assert keyed.error is not None
    assert keyed.error.message == "m"


def test_a_scheduled_message_shows_its_event_s_kind() -> None:
    shown = scheduled_message((5, "g", 9.0, Event(kind="k").to_json(), 1, 2.0))
    assert (shown.id, shown.group_id, shown.kind, shown.due_at) == (5, "g", "k", 9.0)
    assert scheduled_message((5, "g", 9.0, "{", 1, 2.0)).kind == UNDECODABLE_KIND
