"""``pgque messages``, ``pgque message``, ``pgque groups --prefix`` and
``pgque scheduled --group``: browse and search on the command line.

They run the command line's entry function in this process on a ``memory://NAME`` store,
published to through a transport of the test's own.
"""

from __future__ import annotations

import json

from _in_process import Cli

from pgque.core import Event, InMemoryTransport


def test_messages_lists_a_group_head_first_and_pages(cli: Cli, queue: InMemoryTransport) -> None:
    ids = [queue.publish("order-42", Event(kind="step", data={"n": n})) for n in range(3)]
    queue.publish("other", Event(kind="step"))
    shown = cli("messages", "order-42", "--json")
    assert shown.code == 0, shown.err
    rows = [json.loads(line) for line in shown.out.splitlines()]
    assert [r["message_id"] for r in rows] == ids
    assert [r["is_head"] for r in rows] == [True, False, False]
    assert rows[0]["preview"] == '{"n":0}'
    assert rows[0]["enqueued_at"].endswith("+00:00")
    first = cli("messages", "order-42", "--limit", "2")
    assert first.code == 0
    assert f"{ids[0]} head" in first.out
    assert '{"n":1}' in first.out
    assert "--after" in first.err
    cursor = first.err.rsplit("--after", 1)[1].strip()
    rest = cli("messages", "order-42", "--after", cursor, "--json")
    assert [json.loads(line)["message_id"] for line in rest.out.splitlines()] == [ids[2]]
    assert rest.err == ""


def test_messages_by_kind_queue_wide(cli: Cli, queue: InMemoryTransport) -> None:
    wanted = queue.publish("a", Event(kind="invoice"))
    queue.publish("b", Event(kind="mail"))
    shown = cli("messages", "--kind", "invoice", "--json")
    assert [json.loads(line)["message_id"] for line in shown.out.splitlines()] == [wanted]
    none = cli("messages", "--kind", "nothing")
    assert none.code == 0
    assert "no messages of kind 'nothing'" in none.err
    bad = cli("messages", "--kind", "")
    assert bad.code == 2


def test_message_shows_one_and_fails_once_settled(cli: Cli, queue: InMemoryTransport) -> None:
    message_id = queue.publish("g", Event(kind="ping", data="x" * 300))
    shown = cli("message", str(message_id))
    assert shown.code == 0, shown.err
    assert "the head of its group" in shown.out
    assert "ping" in shown.out
    assert "…" in shown.out  # the preview was cut
    as_json = json.loads(cli("message", str(message_id), "--json").out)
    assert as_json["truncated"] is True
    lease = queue.claim()
    assert lease is not None
    assert queue.ack(lease)
    gone = cli("message", str(message_id))
    assert gone.code == 1
    assert "settled or unknown" in gone.err


def test_groups_with_a_prefix(cli: Cli, queue: InMemoryTransport) -> None:
    for group in ("tenant-1:a", "tenant-1:b", "tenant-2:a"):
        queue.publish(group, Event(kind="x"))
    shown = cli("groups", "--prefix", "tenant-1:", "--json")
    assert [json.loads(line)["group_id"] for line in shown.out.splitlines()] == [
        "tenant-1:a",
        "tenant-1:b",
    ]
    none = cli("groups", "--prefix", "tenant-9")
    assert "starting with 'tenant-9'" in none.err


def test_scheduled_of_one_group(cli: Cli, queue: InMemoryTransport) -> None:
    mine = queue.publish("g", Event(kind="later"), delay=3600)
    queue.publish("h", Event(kind="later"), delay=3600)
    shown = cli("scheduled", "--group", "g", "--json")
    assert shown.code == 0, shown.err
    assert [json.loads(line)["id"] for line in shown.out.splitlines()] == [mine]
    found = cli("message", str(mine))
    assert "scheduled, due in" in found.out
