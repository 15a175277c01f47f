"""One undecodable row (event text that is not Event JSON) must not fail a whole claim batch."""

from __future__ import annotations

from collections.abc import Callable

import psycopg

from pgque.core import Event
from pgque.postgres import PostgresTransport

Make = Callable[..., PostgresTransport]

BAD_ROW = """
WITH g AS (
    INSERT INTO pgque_fifo.groups (queue, group_id, priority) VALUES (%(q)s, %(g)s, 0)
    ON CONFLICT DO NOTHING
)
INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at)
VALUES (%(q)s, %(g)s, %(e)s, extract(epoch FROM clock_timestamp()))
RETURNING id
"""


def insert_bad_row(raw: psycopg.Connection[tuple[object, ...]], queue: str, group: str) -> int:
    """Write a message whose event text is not Event JSON, by hand; return its id."""
    row = raw.execute(BAD_ROW, {"q": queue, "g": group, "e": '{"not": "an event"'}).fetchone()
    assert row is not None
    return int(str(row[0]))


def test_claim_many_returns_the_good_rows_and_dead_letters_the_undecodable_one(
    transport_factory: Make, raw: psycopg.Connection[tuple[object, ...]]
) -> None:
    transport = transport_factory()
    transport.publish("a", Event(kind="good-a"))
    bad_id = insert_bad_row(raw, transport.queue, "b")
    transport.publish("b", Event(kind="after-bad"))
    transport.publish("c", Event(kind="good-c"))
    leases = transport.claim_many(10)
    assert sorted(lease.event.kind for lease in leases) == ["good-a", "good-c"]
    dead = transport.dead_letters()
    assert [(d.group_id, d.message_id) for d in dead] == [("b", bad_id)]
    assert "undecodable" in dead[0].reason
    assert dead[0].event.kind == "pgque.undecodable"
    # The group goes on with its next message.
    following = transport.claim()
    assert following is not None
    assert (following.group_id, following.event.kind) == ("b", "after-bad")


#: Event JSON nested deeper than the decoder's recursion limit: json.loads raises
#: RecursionError, which is not a ValueError.
DEEP_EVENT = '{"kind": "x", "data": ' + "[" * 5000 + "]" * 5000 + "}"


def test_a_too_deeply_nested_event_is_dead_lettered_and_listed(
    transport_factory: Make, raw: psycopg.Connection[tuple[object, ...]]
) -> None:
    transport = transport_factory()
    transport.publish("a", Event(kind="good-a"))
    row = raw.execute(
        "SELECT pgque_fifo.pgque_publish_v2(%s, 'b', %s, 0, NULL, NULL)",
        (transport.queue, DEEP_EVENT),
    ).fetchone()
    assert row is not None
    deep_id = int(str(row[0]))
    transport.publish("c", Event(kind="good-c"))
    leases = transport.claim_many(10)
    assert sorted(lease.event.kind for lease in leases) == ["good-a", "good-c"]
    dead = transport.dead_letters()
    assert [(d.group_id, d.message_id) for d in dead] == [("b", deep_id)]
    assert dead[0].reason.startswith("undecodable event")
    assert dead[0].event.kind == "pgque.undecodable"
    shown = dead[0].event.data
    assert isinstance(shown, dict)
    assert shown["text"] == DEEP_EVENT[:4096]
