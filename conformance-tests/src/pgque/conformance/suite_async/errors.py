"""Failures keep their cause: ``error=`` on nack and dead_letter, exhaustion, the stored bounds."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import pytest

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import (
    _claim,
    _ev,
    _info,
)
from pgque.core import AsyncTransport, ErrorInfo
from pgque.core.models import ERROR_MESSAGE_CHARS, ERROR_TRACEBACK_CHARS
from pgque.core.validation import exhausted_reason


class PaymentDeclined(Exception):
    """An application's exception: its type is recorded module-qualified."""


def _raised(exc: BaseException) -> BaseException:
    """Return *exc* after raising and catching it, so it carries a traceback."""
    try:
        raise exc
    except BaseException as caught:
        return caught


def _at_now(harness: AsyncHarness, error: ErrorInfo) -> None:
    if harness.fake_time:
        assert error.at == pytest.approx(harness.now(), abs=1e-3)
    else:
        assert error.at == pytest.approx(harness.now(), abs=5.0)


# -- nack ----------------------------------------------------------------------------------


async def test_nack_records_an_exception(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    await atransport.publish("g", _ev(1))
    assert await atransport.nack(await _claim(atransport), error=_raised(ValueError("bad sku")))
    error = (await _info(atransport, "g")).last_error
    assert error is not None
    assert (error.type, error.message) == ("ValueError", "bad sku")
    assert error.traceback is not None
    assert "Traceback (most recent call last)" in error.traceback
    assert "_raised" in error.traceback
    assert error.traceback.rstrip().endswith("ValueError: bad sku")
    _at_now(harness, error)


async def test_an_application_exception_is_named_by_its_module(
    atransport: AsyncTransport,
) -> None:
    await atransport.publish("g", _ev(1))
    exc = _raised(PaymentDeclined("card 4242"))
    assert await atransport.nack(await _claim(atransport), error=exc)
    error = (await _info(atransport, "g")).last_error
    assert error is not None
    assert error.type == f"{PaymentDeclined.__module__}.PaymentDeclined"
    assert error.message == "card 4242"
    assert error.traceback is not None


async def test_nack_records_a_plain_string(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    assert await atransport.nack(await _claim(atransport), error="upstream 503")
    error = (await _info(atransport, "g")).last_error
    assert error is not None
    assert (error.type, error.message, error.traceback) == ("error", "upstream 503", None)


async def test_nack_without_error_keeps_the_last_one(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    assert await atransport.nack(await _claim(atransport), error="first")
    assert await atransport.nack(await _claim(atransport))
    error = (await _info(atransport, "g")).last_error
    assert error is not None
    assert error.message == "first"
    assert await atransport.nack(await _claim(atransport), error=_raised(KeyError("k")))
    error = (await _info(atransport, "g")).last_error
    assert error is not None
    assert (error.type, error.message) == ("KeyError", "'k'")
    assert (await _info(atransport, "g")).head_attempts == 3


async def test_an_error_record_is_stored_as_given(atransport: AsyncTransport) -> None:
    record = ErrorInfo(type="myapp.Timeout", message="hard timeout", traceback="tb", at=12.5)
    await atransport.publish("g", _ev(1))
    assert await atransport.nack(await _claim(atransport), error=record)
    assert (await _info(atransport, "g")).last_error == record


async def test_the_error_belongs_to_the_message(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    assert await atransport.nack(await _claim(atransport), error="head failed")
    assert await atransport.ack(await _claim(atransport))
    info = await _info(atransport, "g")
    assert (info.depth, info.last_error, info.head_attempts) == (1, None, 0)


async def test_a_fenced_nack_records_nothing(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    u = harness.unit
    await atransport.publish("g", _ev(1))
    stale = await _claim(atransport, u)
    await harness.advance(2 * u)
    await _claim(atransport)
    assert await atransport.nack(stale, error="too late") is False
    assert (await _info(atransport, "g")).last_error is None


# -- dead letters --------------------------------------------------------------------------


async def test_dead_letter_keeps_the_given_error(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    await atransport.publish("g", _ev(1))
    assert await atransport.nack(await _claim(atransport), error="transient")
    exc = _raised(PaymentDeclined("fraud"))
    assert await atransport.dead_letter(await _claim(atransport), "rejected", error=exc)
    [dead] = await atransport.dead_letters()
    assert dead.reason == "rejected"
    assert dead.error is not None
    assert (dead.error.type, dead.error.message) == (
        f"{PaymentDeclined.__module__}.PaymentDeclined",
        "fraud",
    )
    assert dead.error.traceback is not None
    _at_now(harness, dead.error)


async def test_dead_letter_without_error_keeps_the_recorded_one(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    await atransport.publish("a", _ev(1))
    await atransport.publish("b", _ev(2))
    got = {lease.group_id: lease for lease in await atransport.claim_many(2)}
    assert await atransport.nack(got["a"], error="recorded")
    assert await atransport.dead_letter(got["b"], "no error ever")
    assert await atransport.dead_letter(await _claim(atransport), "after a nack")
    by_group = {d.group_id: d for d in await atransport.dead_letters()}
    assert by_group["b"].error is None
    recorded = by_group["a"].error
    assert recorded is not None
    assert (recorded.type, recorded.message) == ("error", "recorded")


async def test_exhaustion_keeps_the_last_error_and_names_the_limit(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=2)
    await q.publish("g", _ev(1))
    assert await q.nack(await _claim(q), error="first")
    assert await q.nack(await _claim(q), error=_raised(TimeoutError("second")))
    assert await q.claim() is None
    [dead] = await q.dead_letters()
    assert "max_attempts" in dead.reason
    assert dead.reason == exhausted_reason(2)
    assert dead.attempts == 2
    assert dead.error is not None
    assert (dead.error.type, dead.error.message) == ("TimeoutError", "second")
    assert q.max_attempts == 2
    assert q.on_exhausted == "dead_letter"


async def test_exhaustion_under_block_shows_the_error_on_the_group(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=2, on_exhausted="block")
    await q.publish("g", _ev(1))
    assert await q.nack(await _claim(q), error="first")
    assert await q.nack(await _claim(q))
    assert await q.claim() is None
    info = await _info(q, "g")
    assert info.state == "blocked"
    assert info.last_error is not None
    assert info.last_error.message == "first"
    assert q.on_exhausted == "block"
    assert await q.unblock("g", drop_head=True)
    [dead] = await q.dead_letters()
    assert dead.error is not None
    assert dead.error.message == "first"


async def test_the_default_limit_is_ten_attempts(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make()
    assert q.max_attempts == 10
    assert q.on_exhausted == "dead_letter"
    await q.publish("g", _ev(1))
    for attempt in range(1, 11):
        lease = await _claim(q)
        assert lease.attempt == attempt
        assert await q.nack(lease, error=f"attempt {attempt}")
    assert await q.claim() is None
    [dead] = await q.dead_letters()
    assert dead.reason == "max_attempts (10) exhausted"
    assert dead.error is not None
    assert dead.error.message == "attempt 10"
    unlimited = await harness.make(max_attempts=None)
    assert unlimited.max_attempts is None


# -- bounds --------------------------------------------------------------------------------


async def test_a_huge_error_is_cut_never_refused(atransport: AsyncTransport) -> None:
    """A 100 kB traceback keeps its end (the raising frame); a long message keeps its start."""
    text = "START " + "m" * 100_000 + " END"
    exc = _raised(RuntimeError(text))
    await atransport.publish("g", _ev(1))
    assert await atransport.nack(await _claim(atransport), error=exc)
    error = (await _info(atransport, "g")).last_error
    assert error is not None
    assert error.type == "RuntimeError"
    assert len(error.message) <= ERROR_MESSAGE_CHARS
    assert error.message.startswith("START mmm")
    assert error.traceback is not None
    assert len(error.traceback) <= ERROR_TRACEBACK_CHARS
    assert error.traceback.rstrip().endswith("m END")
    assert not error.traceback.startswith("Traceback")  # the start was cut
    # A plain string and a record given whole are bounded the same way.
    assert await atransport.nack(await _claim(atransport), error=text)
    error = (await _info(atransport, "g")).last_error
    assert error is not None
    assert len(error.message) <= ERROR_MESSAGE_CHARS
    assert error.message.startswith("START mmm")
    record = ErrorInfo(type="T" * 1000, message=text, traceback=text, at=1.0)
    assert await atransport.nack(await _claim(atransport), error=record)
    error = (await _info(atransport, "g")).last_error
    assert error == record.bounded()
    assert error is not None
    assert error.traceback is not None
    assert error.traceback.endswith(" END")


async def test_unusual_error_text_round_trips(atransport: AsyncTransport) -> None:
    text = "'; DROP TABLE x; -- 🦆 \\ \n\t {pgque:default} ]] .. redis.call('FLUSHALL')"
    await atransport.publish("g", _ev(1))
    assert await atransport.nack(await _claim(atransport), error=text)
    error = (await _info(atransport, "g")).last_error
    assert error is not None
    assert error.message == text
    # NUL and lone surrogates cannot be stored: they are replaced, not refused.
    assert await atransport.nack(await _claim(atransport), error="a\x00b\ud800c")
    error = (await _info(atransport, "g")).last_error
    assert error is not None
    assert error.message.startswith("a")
    assert error.message.endswith("c")
    assert "\x00" not in error.message


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
