"""Job history: what happened to each message, kept while the queue's history is on.

Gated on ``Capabilities.history`` (docs/history.md). A queue records nothing until its history
is set; then every settled delivery (``acked``, ``nacked``, ``released``, ``dead_lettered``),
every head dead-lettered by ``max_attempts`` (``exhausted``) and every redrive (``redriven``)
leaves one record, newest first in ``history()``; a fenced settlement leaves none. Records
older than the retention are never returned; a row cap keeps at least the newest records.
"""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from datetime import datetime

import pytest

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import _claim, _ev
from pgque.core import AsyncSupportsHistory, AsyncTransport, HistoryRecord, InvalidInput

# -- helpers -------------------------------------------------------------------------------


async def _kept(harness: AsyncHarness, setting: str | None = "7d") -> AsyncTransport:
    """Open the test's transport, skip unless it keeps history, and set *setting*."""
    transport = await harness.open()
    harness.require("history")
    assert isinstance(transport, AsyncSupportsHistory)
    if setting is not None:
        await transport.set_history(setting)
    return transport


async def _records(t: AsyncTransport, **filters: object) -> list[HistoryRecord]:
    assert isinstance(t, AsyncSupportsHistory)
    return await t.history(**filters)  # type: ignore[arg-type]


def _outcomes(records: list[HistoryRecord]) -> list[tuple[str, int]]:
    return [(r.outcome, r.attempt) for r in records]


# -- recording -------------------------------------------------------------------------------


async def test_history_records_nothing_until_it_is_set(harness: AsyncHarness) -> None:
    t = await _kept(harness, setting=None)
    await t.publish("g", _ev(1))
    assert await t.ack(await _claim(t))
    assert await _records(t) == []


async def test_each_settled_delivery_leaves_one_record(harness: AsyncHarness) -> None:
    t = await _kept(harness)
    published = harness.now()
    message_id = await t.publish("order-42", _ev(1, kind="confirm"))
    await harness.advance(1.0)
    first = await _claim(t, holder="host-a:1:0")
    await harness.advance(2.0)
    assert await t.nack(first, error=ValueError("card declined"))
    second = await _claim(t, holder="host-b:2:3")
    assert await t.ack(second)
    acked, nacked = await _records(t)
    assert _outcomes([acked, nacked]) == [("acked", 2), ("nacked", 1)]
    assert acked.id > nacked.id
    for record in (acked, nacked):
        assert record.message_id == message_id
        assert record.group_id == "order-42"
        assert record.kind == "confirm"
        assert record.fairness_key is None
        assert record.published_at is not None
        assert abs(record.published_at - published) < harness.unit + 5
    assert nacked.worker == "host-a:1:0"
    assert acked.worker == "host-b:2:3"
    assert nacked.error is not None
    assert nacked.error.message == "card declined"
    assert nacked.error.type == "ValueError"
    assert nacked.started_at is not None
    assert nacked.duration is not None
    if harness.fake_time:
        assert nacked.duration == pytest.approx(2.0)
        assert nacked.started_at == pytest.approx(published + 1.0)
    assert acked.started_at is not None
    assert nacked.finished_at <= acked.finished_at


async def test_a_fenced_settlement_leaves_no_record(harness: AsyncHarness) -> None:
    t = await _kept(harness)
    await t.publish("g", _ev(1))
    lease = await _claim(t)
    assert await t.ack(lease)
    assert not await t.ack(lease)
    assert not await t.nack(lease)
    assert _outcomes(await _records(t)) == [("acked", 1)]


async def test_release_dead_letter_and_redrive_tell_a_messages_story(
    harness: AsyncHarness,
) -> None:
    t = await _kept(harness)
    message_id = await t.publish("g", _ev(1))
    assert await t.release(await _claim(t, holder="w:1:0"))
    lease = await _claim(t, holder="w:1:1")
    assert lease.message_id == message_id
    assert await t.dead_letter(lease, "bad payload", error="no such customer")
    [dead] = await t.dead_letters()
    assert await t.redrive([dead.id]) == 1
    story = await _records(t, message_id=message_id)
    assert [r.outcome for r in story] == ["redriven", "dead_lettered", "released"]
    redriven, buried, released = story
    assert released.attempt == 1
    assert buried.reason == "bad payload"
    assert buried.error is not None
    assert buried.error.message == "no such customer"
    assert released.worker == "w:1:0"
    assert buried.worker == "w:1:1"
    assert redriven.started_at is None
    assert redriven.worker is None
    assert redriven.reason == "bad payload"


async def test_a_head_exhausted_by_max_attempts_is_recorded(harness: AsyncHarness) -> None:
    await _kept(harness, setting=None)
    harness.require("dead_letters")
    t = await harness.make(max_attempts=1)
    assert isinstance(t, AsyncSupportsHistory)
    await t.set_history("7d")
    message_id = await t.publish("g", _ev(1))
    assert await t.nack(await _claim(t), error="timeout")
    assert await t.claim() is None  # the head is exhausted: dead-lettered by this claim
    exhausted, nacked = await _records(t, message_id=message_id)
    assert _outcomes([exhausted, nacked]) == [("exhausted", 1), ("nacked", 1)]
    assert exhausted.started_at is None
    assert exhausted.worker is None
    assert exhausted.reason is not None
    assert "max_attempts" in exhausted.reason
    assert exhausted.error is not None
    assert exhausted.error.message == "timeout"


# -- reading ---------------------------------------------------------------------------------


async def test_history_filters_and_pages_newest_first(harness: AsyncHarness) -> None:
    t = await _kept(harness)
    for i in range(3):
        await t.publish(f"a-{i}", _ev(i, kind="email"))
        await t.publish(f"b-{i}", _ev(i, kind="sms"))
    for _ in range(6):
        lease = await _claim(t)
        if lease.event.kind == "sms" and lease.group_id == "b-1":
            assert await t.nack(lease, delay=3600)
        else:
            assert await t.ack(lease)
    everything = await _records(t)
    assert len(everything) == 6
    ids = [r.id for r in everything]
    assert ids == sorted(ids, reverse=True)
    assert {r.group_id for r in await _records(t, kind="email")} == {"a-0", "a-1", "a-2"}
    assert [r.group_id for r in await _records(t, group="b-1")] == ["b-1"]
    assert [r.group_id for r in await _records(t, outcome="nacked")] == ["b-1"]
    assert len(await _records(t, kind="sms", outcome="acked")) == 2
    first = await _records(t, limit=4)
    rest = await _records(t, limit=4, after=first[-1].id)
    assert [r.id for r in first + rest] == ids
    newest = everything[0]
    assert await _records(t, since=newest.finished_at + 1) == []
    assert newest in await _records(t, since=newest.finished_at)


async def test_records_older_than_the_retention_are_not_returned(harness: AsyncHarness) -> None:
    t = await _kept(harness, setting="60s")
    if not harness.fake_time:
        pytest.skip("needs the injected clock to age records by a minute")
    await t.publish("old", _ev(1))
    assert await t.ack(await _claim(t))
    await harness.advance(30)
    await t.publish("new", _ev(2))
    assert await t.ack(await _claim(t))
    assert [r.group_id for r in await _records(t)] == ["new", "old"]
    await harness.advance(45)
    assert [r.group_id for r in await _records(t)] == ["new"]


async def test_a_row_cap_keeps_the_newest_records(harness: AsyncHarness) -> None:
    t = await _kept(harness, setting="3")
    for i in range(6):
        await t.publish(f"g-{i}", _ev(i))
        assert await t.ack(await _claim(t))
    kept = [r.group_id for r in await _records(t, limit=3)]
    assert kept == ["g-5", "g-4", "g-3"]


async def test_history_off_stops_recording_and_keeps_what_was_recorded(
    harness: AsyncHarness,
) -> None:
    t = await _kept(harness)
    await t.publish("g", _ev(1))
    assert await t.ack(await _claim(t))
    assert isinstance(t, AsyncSupportsHistory)
    await t.set_history("off")
    await t.publish("g", _ev(2))
    assert await t.ack(await _claim(t))
    assert _outcomes(await _records(t)) == [("acked", 1)]


async def test_the_history_option_is_stored_for_every_transport_of_the_queue(
    harness: AsyncHarness,
) -> None:
    first = await _kept(harness, setting=None)
    t = await harness.make(queue=first.queue, history="7d")
    await t.publish("g", _ev(1))
    assert await t.ack(await _claim(t))  # opened by its first settlement at the latest
    await t.publish("g", _ev(2))
    assert await first.ack(await _claim(first))
    assert _outcomes(await _records(first)) == [("acked", 1), ("acked", 1)]


async def test_bad_history_arguments_are_refused(harness: AsyncHarness) -> None:
    t = await _kept(harness)
    assert isinstance(t, AsyncSupportsHistory)
    for setting in ("7x", "", "0s", "7d,7d", "-3", "400d"):
        with pytest.raises(InvalidInput):
            await t.set_history(setting)
    for bad in (
        {"limit": 0},
        {"limit": 1001},
        {"outcome": "done"},
        {"since": datetime(2026, 1, 1)},
        {"after": 0},
        {"group": ""},
        {"message_id": "7"},
    ):
        with pytest.raises(InvalidInput):
            await _records(t, **bad)
