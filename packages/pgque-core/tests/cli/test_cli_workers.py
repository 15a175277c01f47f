"""``pgque workers``: the table of a queue's workers, the slots and leases table, --alive and
--json.

They run the command line's entry function in this process on a ``memory://NAME`` store (the
in-memory transport keeps live workers), heartbeating through a transport of the test's own.
"""

from __future__ import annotations

import json
import time
from datetime import datetime

from _in_process import Cli

from pgque.core import Event, InMemoryTransport, SlotBeat, WorkerBeat


def _beat(worker: str, holder: str, every: float, *slots: SlotBeat) -> WorkerBeat:
    host, _, pid = holder.rpartition(":")
    return WorkerBeat(worker, holder, host, int(pid), "9.9.9", 4, every, tuple(slots))


def test_an_empty_queue_says_it_has_no_workers(cli: Cli, queue: InMemoryTransport) -> None:
    result = cli("workers")
    assert result.code == 0
    assert result.out == ""
    assert "no workers on queue default" in result.err


def test_the_table_shows_each_worker_its_slots_and_its_leases(
    cli: Cli, queue: InMemoryTransport
) -> None:
    message_id = queue.publish("order-42", Event(kind="k"))
    assert queue.claim(60.0, holder="web-1:77:0") is not None
    queue.heartbeat(_beat("billing", "web-1:77", 10.0, SlotBeat(0, "order-42", message_id, 3.0)))
    result = cli("workers")
    assert result.code == 0, result.err
    assert "workers of queue default" in result.out
    line = next(line for line in result.out.splitlines() if line.strip().startswith("billing"))
    assert "alive" in line
    assert "1/4" in line
    assert "9.9.9" in line
    assert "web-1" in line
    assert "slot 0" in result.out
    assert "running for 3.0 s" in result.out
    assert "lease web-1:77:0" in result.out
    assert "order-42" in result.out


def test_alive_leaves_out_a_gone_worker_and_json_prints_one_line_each(
    cli: Cli, queue: InMemoryTransport
) -> None:
    queue.heartbeat(_beat("fresh", "web-1:1", 600.0))
    queue.heartbeat(_beat("silent", "web-2:2", 0.1))
    # "silent" promised a heartbeat every 0.1 s: once 0.3 s pass without one, it is gone.
    deadline = datetime.now().timestamp() + 5
    while [w.id for w in queue.workers(include_gone=False)] != ["fresh"]:
        assert datetime.now().timestamp() < deadline
        time.sleep(0.01)
    everyone = cli("workers", "--json")
    assert everyone.code == 0, everyone.err
    rows = [json.loads(line) for line in everyone.out.splitlines()]
    assert [(r["id"], r["alive"]) for r in rows] == [("fresh", True), ("silent", False)]
    assert datetime.fromisoformat(rows[0]["last_heartbeat"]).tzinfo is not None
    alive = cli("workers", "--alive", "--json")
    assert [json.loads(line)["id"] for line in alive.out.splitlines()] == ["fresh"]
    table = cli("workers")
    assert "gone" in next(line for line in table.out.splitlines() if "silent" in line)
