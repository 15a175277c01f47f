"""Job history on Redis: what the conformance suite's ``history`` cases cannot see.

The records are entries of one stream per queue (``<prefix>hlog``) appended by the script of
each settlement; its bounds are Redis's own trims (MAXLEN ~ and MINID ~); a record id is its
entry id as ``ms * 1024 + seq``; a message's story is read through a small per-message index
(``<prefix>hm:<hour>``); reads examine a bounded number of entries per call.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis
from redis.crc import key_slot

import pgque.redis._history as redis_history
from pgque.core import Event, connect
from pgque.redis import AsyncRedisTransport, RedisTransport
from pgque.redis._history import SEQ_BITS, entry_id, record_id
from pgque.redis._replies import text

Factory = Callable[..., RedisTransport]


def _claim(transport: RedisTransport, **options: Any) -> Any:
    lease = transport.claim(**options)
    assert lease is not None
    return lease


def _keys(raw: redis.Redis, transport: RedisTransport) -> set[str]:
    prefix = transport.key_prefix
    return {text(k).removeprefix(prefix) for k in raw.scan_iter(match=prefix + "*")}


# -- ids -------------------------------------------------------------------------------------


def test_record_ids_follow_entry_ids_and_back() -> None:
    entries = ["1733600000000-0", "1733600000000-1", "1733600000000-1023", "1733600000001-0"]
    ids = [record_id(entry) for entry in entries]
    assert ids == sorted(ids)
    assert len(set(ids)) == 4
    assert [entry_id(i) for i in ids] == entries
    # Exact as a double (JSON in a browser) until the year 2248.
    assert record_id(f"{2**43 - 1}-{2**SEQ_BITS - 1}") < 2**53
    assert record_id(b"5-7") == (5 << SEQ_BITS) + 7


def test_a_record_whose_sequence_would_overflow_takes_the_next_millisecond(
    transport_factory: Factory, raw_client: redis.Redis
) -> None:
    t = transport_factory()
    # An entry far ahead with the last sequence number a record id holds: the next record's
    # entry id would be that millisecond's 1025th.
    ahead = (time.time_ns() // 1_000_000) + 3_600_000
    hlog = t.key_prefix + "hlog"
    t.set_history("7d")
    raw_client.xadd(hlog, {"x": "1"}, id=f"{ahead}-{2**SEQ_BITS - 1}")
    t.publish("g", Event(kind="k"))
    assert t.ack(_claim(t))
    [record] = t.history()
    assert entry_id(record.id) == f"{ahead + 1}-0"
    assert record.id > record_id(f"{ahead}-{2**SEQ_BITS - 1}")
    entries: Any = raw_client.xrange(hlog)
    assert [text(e[0]) for e in entries] == [
        f"{ahead}-{2**SEQ_BITS - 1}",
        f"{ahead + 1}-0",
    ]


# -- what is recorded, and where -------------------------------------------------------------


def test_history_off_writes_no_history_key(
    transport_factory: Factory, raw_client: redis.Redis
) -> None:
    t = transport_factory(max_attempts=1)
    t.publish("g", Event(kind="k"))
    t.publish("g", Event(kind="k"))
    assert t.nack(_claim(t))
    assert t.ack(_claim(t))  # this claim dead-lettered the exhausted head first
    assert t.stats().dead_letters == 1
    names = _keys(raw_client, t)
    assert not {name for name in names if name.startswith(("hist", "hlog", "hm:"))}


def test_history_keys_share_the_queue_slot_and_purge_keeps_only_the_setting(
    transport_factory: Factory, raw_client: redis.Redis
) -> None:
    t = transport_factory(max_attempts=2, history="7d,1000")
    for group in ("a", "{b}", "ünï"):
        t.publish(group, Event(kind="k"))
    lease = _claim(t, holder="w:1:0")
    assert t.dead_letter(lease, "bad", error="boom")
    assert t.redrive() == 1
    for lease in t.claim_many(3, holder="w:1:1"):
        assert t.ack(lease)
    names = _keys(raw_client, t)
    assert {"hist", "hlog"} <= names
    assert any(name.startswith("hm:") for name in names)  # the message index
    prefix = t.key_prefix
    assert {key_slot((prefix + name).encode()) for name in names} == {key_slot(prefix.encode())}
    t.purge()
    assert _keys(raw_client, t) == {"seq", "dseq", "meta", "hist"}
    assert t.history() == []
    t.publish("a", Event(kind="k"))
    assert t.ack(_claim(t))  # the setting outlived the purge: still recording
    assert [r.outcome for r in t.history()] == ["acked"]


def test_a_redrive_record_keeps_the_message_publish_time_and_an_operator_drop_no_worker(
    transport_factory: Factory,
) -> None:
    t = transport_factory(max_attempts=1, on_exhausted="block", history="7d")
    message_id = t.publish("g", Event(kind="confirm"))
    lease = _claim(t, holder="w:1:0")
    assert t.dead_letter(lease, "bad payload", error="no such customer")
    assert t.redrive() == 1
    assert t.nack(_claim(t, holder="w:1:1"), error="still failing")
    assert t.claim() is None  # blocks the exhausted group
    assert t.unblock("g", drop_head=True)
    dropped, nacked, redriven, buried = t.history(message_id=message_id)
    assert [r.outcome for r in (dropped, nacked, redriven, buried)] == [
        "dead_lettered",
        "nacked",
        "redriven",
        "dead_lettered",
    ]
    assert buried.published_at is not None
    assert redriven.published_at == buried.published_at  # the dead letter kept it
    assert redriven.kind == "confirm"
    assert redriven.error is not None
    assert redriven.error.message == "no such customer"
    assert (dropped.worker, dropped.started_at) == (None, None)
    assert dropped.reason == "dropped by operator (unblock)"
    assert dropped.error is not None
    assert dropped.error.message == "still failing"
    assert nacked.worker == "w:1:1"
    assert buried.worker == "w:1:0"
    assert nacked.started_at is not None
    assert nacked.started_at <= nacked.finished_at


def test_a_head_that_is_not_json_is_recorded_as_dead_lettered(
    transport_factory: Factory, raw_client: redis.Redis
) -> None:
    t = transport_factory(history="7d")
    t.open()  # stores the setting (a claim's lease would, after its script)
    message_id = t.publish("g", Event(kind="k"))
    raw_client.hset(t.key_prefix + "msg", str(message_id), b"{not json")
    assert t.claim() is None
    [record] = t.history()
    assert (record.outcome, record.message_id, record.kind) == ("dead_lettered", message_id, "")
    assert record.reason is not None
    assert record.reason.startswith("undecodable event")
    assert record.worker is None


def test_a_kind_is_read_from_events_whatever_their_text(
    transport_factory: Factory, raw_client: redis.Redis
) -> None:
    t = transport_factory(history="7d")
    kinds = ['say "hi"', "ünïcode", "back\\slash"]
    for n, kind in enumerate(kinds):
        t.publish(f"g{n}", Event(kind=kind, id=f'id "{n}"'))
    # JSON written by something else, with its fields in another order.
    other = t.publish("g9", Event(kind="k"))
    raw_client.hset(t.key_prefix + "msg", str(other), '{"kind":"reordered","id":"x","data":{}}')
    for _ in range(4):
        assert t.ack(_claim(t))
    assert {r.kind for r in t.history()} == {*kinds, "reordered"}


# -- bounds ----------------------------------------------------------------------------------


def test_a_row_cap_trims_the_stream_at_each_record(
    transport_factory: Factory, raw_client: redis.Redis
) -> None:
    t = transport_factory(history="50")
    for n in range(400):
        t.publish(f"g{n}", Event(kind="k"))
    acked: list[str] = []
    while (lease := t.claim()) is not None:
        assert t.ack(lease)
        acked.append(lease.group_id)
    length = raw_client.xlen(t.key_prefix + "hlog")
    # MAXLEN ~ drops whole nodes of the stream (100 entries each by default): at least the
    # cap is kept, never much more.
    assert 50 <= length <= 50 + 100
    assert [r.group_id for r in t.history(limit=3)] == acked[:-4:-1]


def test_a_duration_trims_entries_older_than_it_by_the_server_clock(
    transport_factory: Factory, raw_client: redis.Redis
) -> None:
    t = transport_factory(history="3s")
    for n in range(250):
        t.publish(f"g{n}", Event(kind="k"))
    assert all(t.ack_many(t.claim_many(250)))  # 250 records by one script
    hlog = t.key_prefix + "hlog"
    assert raw_client.xlen(hlog) == 250
    time.sleep(3.2)
    t.publish("late", Event(kind="k"))
    assert t.ack(_claim(t))
    # MINID ~ drops the whole nodes older than 3 s; the rest is never returned.
    assert raw_client.xlen(hlog) < 250
    assert [r.group_id for r in t.history()] == ["late"]


# -- reading ---------------------------------------------------------------------------------


def test_reads_examine_a_bounded_number_of_entries_per_call(
    transport_factory: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = transport_factory(history="7d")
    for n in range(60):
        t.publish("needle" if n % 20 == 7 else f"hay{n}", Event(kind="k"))
        assert t.ack(_claim(t))
    calls: list[tuple[Any, ...]] = []
    real = redis_history.decode_history

    def counted(reply: Any) -> Any:
        calls.append(tuple(reply))
        return real(reply)

    monkeypatch.setattr(redis_history, "HISTORY_SCAN_BUDGET", 8)
    monkeypatch.setattr("pgque.redis._driver_sync.decode_history", counted)
    found = t.history(group="needle")
    assert [r.group_id for r in found] == ["needle"] * 3
    ids = [r.id for r in found]
    assert ids == sorted(ids, reverse=True)
    assert len(calls) == 8  # 60 entries, 8 at a time
    calls.clear()
    assert [r.id for r in t.history(group="needle", limit=2)] == ids[:2]
    assert len(calls) == 5  # stops once the page is full
    calls.clear()
    assert [r.id for r in t.history(group="needle", after=ids[0])] == ids[1:]


def _index(raw: redis.Redis, t: RedisTransport) -> dict[str, dict[str, str]]:
    """The message index's hashes of *t*'s queue, by their key's suffix (the hour)."""
    prefix = t.key_prefix + "hm:"
    return {
        text(key).removeprefix(prefix): {text(k): text(v) for k, v in raw.hgetall(key).items()}
        for key in raw.scan_iter(match=prefix + "*")
    }


def test_a_messages_story_is_read_through_its_index_in_one_call(
    transport_factory: Factory, raw_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = transport_factory(history="1h")
    message_id = t.publish("story", Event(kind="k"))
    assert t.nack(_claim(t))
    assert t.release(_claim(t))
    assert t.ack(_claim(t))
    for n in range(40):  # newer records of other messages, examined first by a scan
        t.publish(f"other{n}", Event(kind="k"))
        assert t.ack(_claim(t))
    index = _index(raw_client, t)
    hour = str(int(raw_client.time()[0]) // 3600)
    assert set(index) <= {hour, str(int(hour) - 1)}  # this hour (or the last, at its turn)
    listed = " ".join(hashes[str(message_id)] for _, hashes in sorted(index.items()))
    ttl = raw_client.ttl(t.key_prefix + f"hm:{hour}")
    assert 7_100 < ttl <= 7_200  # the duration and the hour it spans
    monkeypatch.setattr(redis_history, "HISTORY_SCAN_BUDGET", 5)
    calls: list[int] = []
    real = redis_history.decode_history

    def counted(reply: Any) -> Any:
        calls.append(1)
        return real(reply)

    monkeypatch.setattr("pgque.redis._driver_sync.decode_history", counted)
    story = t.history(message_id=message_id)
    assert [r.outcome for r in story] == ["acked", "released", "nacked"]
    assert [entry_id(r.id) for r in reversed(story)] == listed.split()
    assert len(calls) == 1
    assert t.history(message_id=message_id, after=story[0].id, limit=1) == [story[1]]
    assert t.history(message_id=message_id, outcome="nacked") == [story[2]]
    calls.clear()
    assert t.history(message_id=10**9) == []  # no record: still one call, no scan
    assert len(calls) == 1


def test_a_row_cap_alone_keeps_the_message_index_thirty_days(
    transport_factory: Factory, raw_client: redis.Redis
) -> None:
    t = transport_factory(history="1000")
    message_id = t.publish("g", Event(kind="k"))
    assert t.ack(_claim(t))
    [(hour, hashes)] = _index(raw_client, t).items()
    assert list(hashes) == [str(message_id)]
    ttl = raw_client.ttl(t.key_prefix + f"hm:{hour}")
    assert 30 * 86_400 + 3_600 - 60 < ttl <= 30 * 86_400 + 3_600


# -- the option ------------------------------------------------------------------------------


def test_the_url_option_is_stored_at_open(
    redis_url: str, new_queue: Callable[[], str], raw_client: redis.Redis
) -> None:
    queue = new_queue()
    joiner = "&" if "?" in redis_url else "?"  # a throwaway server's URL has a query already
    with connect(f"{redis_url}{joiner}queue={queue}&history=7d,5000") as t:
        assert isinstance(t, RedisTransport)
        t.open()
        assert text(raw_client.get(t.key_prefix + "hist")) == "604800.0 5000"
        t.set_history("off")
        assert raw_client.get(t.key_prefix + "hist") is None
        t.set_history("12h")
        assert text(raw_client.get(t.key_prefix + "hist")) == "43200.0 -"


@pytest.mark.asyncio
async def test_the_asyncio_transport_records_and_reads(
    async_transport_factory: Callable[..., Awaitable[AsyncRedisTransport]],
) -> None:
    t = await async_transport_factory(history="7d")
    message_id = await t.publish("g", Event(kind="k"))
    lease = await t.claim(holder="a:1:0")
    assert lease is not None
    assert await t.ack(lease)
    [record] = await t.history(message_id=message_id)
    assert (record.outcome, record.worker, record.attempt) == ("acked", "a:1:0", 1)
