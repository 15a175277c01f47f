"""``pgque history``: a queue's records, a message's story, filters, paging and --set.

They run the command line's entry function in this process on a ``memory://NAME`` store (the
in-memory transport keeps history), settled through a transport of the test's own.
"""

from __future__ import annotations

import json

from _in_process import Cli

from pgque.core import Event, InMemoryTransport


def _settle(queue: InMemoryTransport, group: str, kind: str, *, fail: bool = False) -> int:
    message_id = queue.publish(group, Event(kind=kind))
    lease = queue.claim(holder="web-1:77:0")
    assert lease is not None
    if fail:
        assert queue.nack(lease, error=ValueError("card declined"))
        lease = queue.claim(holder="web-2:88:1")
        assert lease is not None
    assert queue.ack(lease)
    return message_id


def test_set_then_list_a_messages_story(cli: Cli, queue: InMemoryTransport) -> None:
    assert cli("history", "--set", "7d,1000").code == 0
    message_id = _settle(queue, "order-42", "confirm", fail=True)
    _settle(queue, "order-43", "confirm")
    story = cli("history", "--message", str(message_id), "--json")
    assert story.code == 0
    lines = [json.loads(line) for line in story.out.splitlines()]
    assert [(r["outcome"], r["attempt"], r["worker"]) for r in lines] == [
        ("acked", 2, "web-2:88:1"),
        ("nacked", 1, "web-1:77:0"),
    ]
    assert lines[1]["error"]["message"] == "card declined"
    assert lines[0]["finished_at"].endswith("+00:00")
    table = cli("history")
    assert table.code == 0
    assert "order-43" in table.out
    assert "ValueError: card declined" in table.out


def test_filters_and_paging(cli: Cli, queue: InMemoryTransport) -> None:
    queue.set_history("1h")
    for n in range(4):
        _settle(queue, f"g-{n}", "email" if n % 2 else "sms")
    emails = cli("history", "--kind", "email", "--json")
    assert sorted(json.loads(line)["group_id"] for line in emails.out.splitlines()) == [
        "g-1",
        "g-3",
    ]
    first = cli("history", "--limit", "2", "--json")
    assert "more records may follow: --after" in first.err
    last_id = json.loads(first.out.splitlines()[-1])["id"]
    rest = cli("history", "--limit", "2", "--after", str(last_id), "--json")
    groups = [
        json.loads(line)["group_id"] for line in first.out.splitlines() + rest.out.splitlines()
    ]
    assert groups == ["g-3", "g-2", "g-1", "g-0"]
    assert cli("history", "--since", "10m", "--outcome", "acked", "--json").out.count("\n") == 4
    assert cli("history", "--since", "2000-01-01T00:00:00+00:00", "--json").out.count("\n") == 4
    empty = cli("history", "--outcome", "nacked")
    assert (empty.code, empty.out) == (0, "")
    assert "no history records" in empty.err


def test_bad_input_is_a_usage_error(cli: Cli, queue: InMemoryTransport) -> None:
    bad_set = cli("history", "--set", "forever")
    assert bad_set.code == 2
    assert "--set" in bad_set.err
    assert cli("history", "--outcome", "done").code == 2
    assert cli("history", "--limit", "0").code == 2
    assert cli("history", "--since", "yesterday").code == 2
