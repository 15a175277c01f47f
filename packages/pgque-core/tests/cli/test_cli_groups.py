"""The group commands (``groups``, ``group``, ``pause``, ``resume``) and the dead-letter
commands of issue 14 (``dead-letters show``, in-place ``redrive``, ``delete``, ``list --after``).

They run the command line's entry function in this process on a ``memory://NAME`` store,
which every transport of the process opened with that name shares: the test sets up and
checks through a transport of its own, as an operator's application would (the console
script is a one-line wrapper of the same function; tests/cli/test_cli_basics.py runs it).
``explain`` (the sentence ending ``pgque group``) is checked word for word at a fixed time.
"""

from __future__ import annotations

import json
import re

import pytest
from _in_process import Cli, Result

from pgque.core import ErrorInfo, Event, GroupInfo, QueueStats, Transport, connect
from pgque.core.cli._groups import explain, ready_ahead

#: 2026-01-31 12:00:00 UTC
NOON = 1_769_860_800.0


def _fail(transport: Transport, group: str, message: str = "bad sku", **nack: float) -> None:
    """Claim *group*'s head and nack it with a ValueError raised (so it has a traceback)."""
    lease = transport.claim(holder="test:1:0")
    assert lease is not None
    assert lease.group_id == group
    assert transport.nack(lease, error=_raised(message), **nack)


def _raised(message: str) -> ValueError:
    """Return a ValueError that was raised (it carries a traceback)."""
    try:
        raise ValueError(message)
    except ValueError as exc:
        return exc


def _json_lines(result: Result) -> list[dict[str, object]]:
    assert result.code == 0, result
    return [json.loads(line) for line in result.out.splitlines()]


# ---------------------------------------------------------------- pgque groups


def test_groups_lists_every_state_in_byte_order(cli: Cli, queue: Transport) -> None:
    for group in ("a-leased", "b-parked", "c-ready"):
        queue.publish(group, Event(kind="k"))
    leased = queue.claim(holder="host-1:42:0")  # never-served groups go first, by id
    assert leased is not None
    assert leased.group_id == "a-leased"
    lease = queue.claim()
    assert lease is not None
    assert lease.group_id == "b-parked"
    assert queue.nack(lease, delay=600.0, error="no stock")
    assert queue.pause("d-paused")
    rows = _json_lines(cli("groups", "--json"))
    assert [(r["group_id"], r["state"]) for r in rows] == [
        ("a-leased", "leased"),
        ("b-parked", "parked"),
        ("c-ready", "ready"),
        ("d-paused", "paused"),
    ]
    first, parked, _ready, paused = rows
    assert first["lease_holder"] == "host-1:42:0"
    assert isinstance(first["lease_expires_at"], str)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00", first["lease_expires_at"])
    assert parked["last_error"] == {
        "type": "error",
        "message": "no stock",
        "traceback": None,
        "at": parked["last_error"]["at"],  # type: ignore[index]
    }
    assert paused["depth"] == 0
    only = _json_lines(cli("groups", "--state", "paused", "--json"))
    assert [r["group_id"] for r in only] == ["d-paused"]


def test_groups_pages_with_limit_and_after(cli: Cli, queue: Transport) -> None:
    for n in range(5):
        queue.publish(f"g{n}", Event(kind="k"))
    first = cli("groups", "--limit", "2")
    assert first.code == 0, first
    assert "more groups may follow: --after g1" in first.err
    rest = _json_lines(cli("groups", "--after", "g1", "--json"))
    assert [r["group_id"] for r in rest] == ["g2", "g3", "g4"]
    none = cli("groups", "--after", "g4")
    assert none.code == 0
    assert "no groups after 'g4'" in none.err


def test_groups_table_fits_80_columns(
    cli: Cli, queue: Transport, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # a terminal's usual width (the fixture's is 200)
    long_group = "customer-eu-000123-order-7-with-a-long-tail"
    queue.publish(long_group, Event(kind="k"))
    queue.publish("short", Event(kind="k"))
    lease = queue.claim(holder="ip-10-0-1-23.eu-west-1.compute.internal:12345:7")
    assert lease is not None
    result = cli("groups")
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any(line.lstrip().startswith("customer-eu-") and "…" in line for line in lines)
    assert any("ip-10-0-1-23.eu-" in line and line.rstrip().endswith("…") for line in lines)
    header = next(line for line in lines if "state" in line)
    for column in ("group", "state", "depth", "tries", "age", "note"):
        assert column in header


def test_groups_refuses_a_bad_state_or_limit(cli: Cli) -> None:
    bad_state = cli("groups", "--state", "stuck")
    assert bad_state.code == 2
    assert "--state" in bad_state.error_line()
    bad_limit = cli("groups", "--limit", "1001")
    assert bad_limit.code == 2
    assert "--limit" in bad_limit.error_line()


# ---------------------------------------------------------------- pgque group


def test_group_of_a_parked_group_ends_with_why(cli: Cli, queue: Transport) -> None:
    queue.publish("tenant-x", Event(kind="order.created"))
    _fail(queue, "tenant-x", delay=600.0)
    result = cli("group", "tenant-x")
    assert result.code == 0, result
    assert re.fullmatch(
        r"parked until (\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d UTC \(in 10\.0 min\) "
        r"after attempt 1 failed with ValueError: bad sku",
        result.last_line,
    ), result.last_line
    assert "traceback of the last error:" in result.out
    assert "raise ValueError(message)" in result.out
    for field in ("state", "depth", "head attempts", "lease holder", "resume at", "last error"):
        assert field in result.out
    data = json.loads(cli("group", "tenant-x", "--json").out)
    assert data["state"] == "parked"
    assert data["queue"] == "default"
    assert data["why"] == result.last_line
    assert data["last_error"]["type"] == "ValueError"
    assert "Traceback" in data["last_error"]["traceback"]


def test_group_of_a_blocked_group_says_how_to_fix_it(url: str, cli: Cli) -> None:
    with connect(url, max_attempts=1, on_exhausted="block") as queue:
        queue.publish("tenant x", Event(kind="order.created"))
        _fail(queue, "tenant x")
        assert queue.claim() is None  # exhausted: blocked
    line = cli("group", "tenant x").last_line
    assert line.startswith("blocked since ")
    assert (
        ": max_attempts (1) exhausted, the last attempt failed with ValueError: bad sku — "
        "run `pgque unblock 'tenant x'` to retry its head, or "
        "`pgque unblock 'tenant x' --drop-head` to move it to the dead letters"
    ) in line


def test_group_of_a_leased_paused_and_ready_group(cli: Cli, queue: Transport) -> None:
    queue.publish("leased", Event(kind="k"))
    queue.publish("ready-1", Event(kind="k"))
    queue.publish("ready-2", Event(kind="k"))
    lease = queue.claim(holder="web-3:981:2")
    assert lease is not None
    assert lease.group_id == "leased"
    leased = cli("group", "leased").last_line
    assert re.fullmatch(
        r"leased by web-3:981:2 until (\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d UTC "
        r"\(in (29\.\d|30\.0) s\): attempt 1 is running",
        leased,
    ), leased
    ready = cli("group", "ready-2").last_line
    assert ready == (
        "ready: about 1 other ready group may be served before it (an estimate from the "
        "queue's counts: claims go to the group served longest ago)"
    )
    assert queue.pause("ready-1")
    paused = cli("group", "ready-1").last_line
    assert paused == "paused by an operator: no claim leases it until `pgque resume ready-1`"


def test_group_that_does_not_exist_is_one_error_line(cli: Cli, queue: Transport) -> None:
    result = cli("group", "nobody")
    assert result.code == 1
    assert "has never been used" in result.error_line()  # nothing was ever published there
    queue.publish("somebody", Event(kind="k"))
    result = cli("group", "nobody")
    assert result.code == 1
    assert "has no group 'nobody'" in result.error_line()


def test_group_ids_are_shown_as_text_not_markup(cli: Cli, queue: Transport) -> None:
    hostile = "[red]t[/red]"
    queue.publish(hostile, Event(kind="k"))
    assert hostile in cli("group", hostile).out
    assert hostile in cli("groups").out


def _info(**fields: object) -> GroupInfo:
    base: dict[str, object] = {"group_id": "tenant-42", "depth": 3, "priority": 0}
    return GroupInfo.model_validate({**base, **fields})


ERROR = ErrorInfo(type="ValueError", message="bad sku\nmore lines", at=NOON - 60)


@pytest.mark.parametrize(
    ("info", "ahead", "sentence"),
    [
        pytest.param(
            _info(state="parked", head_attempts=3, resume_at=NOON + 187, last_error=ERROR),
            None,
            "parked until 12:03:07 UTC (in 3.1 min) after attempt 3 failed with "
            "ValueError: bad sku",
            id="parked",
        ),
        pytest.param(
            _info(state="parked", head_attempts=1, resume_at=NOON + 5),
            None,
            "parked until 12:00:05 UTC (in 5.0 s) after attempt 1 (no error was recorded)",
            id="parked without error",
        ),
        pytest.param(
            _info(state="blocked", head_attempts=10, last_error=ERROR),
            None,
            "blocked since 11:59:00 UTC: max_attempts (10) exhausted, the last attempt failed "
            "with ValueError: bad sku — run `pgque unblock tenant-42` to retry its head, or "
            "`pgque unblock tenant-42 --drop-head` to move it to the dead letters",
            id="blocked",
        ),
        pytest.param(
            _info(
                state="leased",
                head_attempts=2,
                lease_expires_at=NOON + 30,
                lease_holder="web-3:981:2",
                last_error=ERROR,
            ),
            None,
            "leased by web-3:981:2 until 12:00:30 UTC (in 30.0 s): attempt 2 is running; "
            "an earlier attempt failed with ValueError: bad sku",
            id="leased",
        ),
        pytest.param(
            _info(state="leased", head_attempts=1, lease_expires_at=NOON + 86400 + 1),
            None,
            "leased by a claim without a holder until 2026-02-01 12:00:01 UTC (in 24.0 h): "
            "attempt 1 is running",
            id="leased until tomorrow, no holder",
        ),
        pytest.param(
            _info(state="paused", depth=0),
            None,
            "paused by an operator: no claim leases it until `pgque resume tenant-42` (it "
            "holds no messages yet; publishes still append)",
            id="paused empty",
        ),
        pytest.param(
            _info(
                state="paused",
                head_attempts=1,
                lease_expires_at=NOON + 10,
                lease_holder="w:1:0",
            ),
            None,
            "paused by an operator: no claim leases it until `pgque resume tenant-42`; the "
            "lease of w:1:0 (until 12:00:10 UTC) finishes normally",
            id="paused with a lease out",
        ),
        pytest.param(
            _info(state="ready"),
            0,
            "ready: the next claim serves it (no other group is ready)",
            id="ready alone",
        ),
        pytest.param(
            _info(state="ready", head_attempts=1, last_error=ERROR),
            4,
            "ready: about 4 other ready groups may be served before it (an estimate from "
            "the queue's counts: claims go to the group served longest ago); attempt 1 "
            "failed with ValueError: bad sku",
            id="ready after a failure",
        ),
        pytest.param(
            _info(
                state="ready",
                head_attempts=1,
                lease_expires_at=NOON - 5,
                lease_holder="w:1:0",
            ),
            3,
            "ready: the lease of w:1:0 expired at 11:59:55 UTC (its worker may have stopped "
            "or died); the next claim delivers its head again, as attempt 2",
            id="ready after an expired lease",
        ),
    ],
)
def test_explain_says_why_in_one_sentence(
    info: GroupInfo, ahead: int | None, sentence: str
) -> None:
    assert explain(info, now=NOON, ahead=ahead) == sentence


def test_ready_ahead_counts_the_other_ready_groups() -> None:
    stats = QueueStats(
        groups=10,
        messages=20,
        in_flight=2,
        parked=1,
        blocked=1,
        paused=1,
        dead_letters=0,
        oldest_age_s=None,
    )
    assert ready_ahead(stats) == 4
    assert ready_ahead(stats.model_copy(update={"groups": 5})) == 0


# ---------------------------------------------------------------- pause / resume


def test_pause_and_resume(cli: Cli, queue: Transport) -> None:
    queue.publish("tenant-x", Event(kind="k"))
    paused = cli("pause", "tenant-x")
    assert paused.code == 0, paused
    assert paused.out.strip() == "paused tenant-x: no claim leases it until `pgque resume tenant-x`"
    assert queue.claim() is None
    again = cli("pause", "tenant-x")
    assert (again.code, again.out.strip()) == (0, "tenant-x was already paused")
    resumed = cli("resume", "tenant-x")
    assert (resumed.code, resumed.out.strip()) == (0, "resumed tenant-x")
    lease = queue.claim()
    assert lease is not None
    assert lease.group_id == "tenant-x"
    not_paused = cli("resume", "tenant-x")
    assert not_paused.code == 1
    assert "group 'tenant-x' is not paused in queue 'default'" in not_paused.error_line()


def test_pause_holds_a_group_before_its_messages_arrive(cli: Cli, queue: Transport) -> None:
    assert cli("pause", "tenant-new").code == 0
    queue.publish("tenant-new", Event(kind="k"))
    assert queue.claim() is None
    info = queue.group("tenant-new")
    assert info is not None
    assert (info.state, info.depth) == ("paused", 1)


# ---------------------------------------------------------------- dead letters


def _dead_letter(queue: Transport, group: str, *, error: bool = True) -> int:
    queue.publish(group, Event(kind="order.created", data={"sku": "X-1"}))
    lease = queue.claim()
    assert lease is not None
    assert queue.dead_letter(lease, "rejected", error=_raised("bad sku") if error else None)
    return max(letter.id for letter in queue.dead_letters())


def test_dead_letters_show_prints_the_stored_traceback(cli: Cli, queue: Transport) -> None:
    letter_id = _dead_letter(queue, "tenant-x")
    result = cli("dead-letters", "show", str(letter_id))
    assert result.code == 0, result
    assert "Traceback (most recent call last)" in result.out
    assert "ValueError: bad sku" in result.out
    assert '"sku": "X-1"' in result.out
    assert result.last_line == (
        f"`pgque dead-letters redrive {letter_id}` returns it to group tenant-x in place; "
        f"`pgque dead-letters delete {letter_id}` drops it"
    )
    data = json.loads(cli("dead-letters", "show", str(letter_id), "--json").out)
    assert data["id"] == letter_id
    assert data["error"]["type"] == "ValueError"
    assert data["error"]["traceback"].startswith("Traceback")
    assert data["error"]["at"].endswith("+00:00")
    missing = cli("dead-letters", "show", str(letter_id + 100))
    assert missing.code == 1
    assert f"no dead letter {letter_id + 100}" in missing.error_line()


def test_dead_letters_list_shows_the_error_and_pages(cli: Cli, queue: Transport) -> None:
    ids = [_dead_letter(queue, f"g{n}") for n in range(3)]
    table = cli("dead-letters", "list", "--limit", "2")
    assert table.code == 0, table
    assert "ValueError: bad sku" in table.out
    assert f"more dead letters may follow: --after {ids[1]}" in table.err
    rest = _json_lines(cli("dead-letters", "list", "--after", str(ids[1]), "--json"))
    assert [r["id"] for r in rest] == [ids[2]]


def test_dead_letters_redrive_is_in_place_by_default(cli: Cli, queue: Transport) -> None:
    first = queue.publish("tenant-x", Event(kind="order.created"))
    second = queue.publish("tenant-x", Event(kind="order.shipped"))
    lease = queue.claim()
    assert lease is not None
    assert lease.message_id == first
    assert queue.dead_letter(lease, "rejected")
    [letter] = queue.dead_letters()
    result = cli("dead-letters", "redrive", str(letter.id))
    assert (result.code, result.out.strip()) == (0, "redrove 1 dead letter in place")
    lease = queue.claim()
    assert lease is not None
    assert (lease.message_id, lease.event.kind, lease.attempt) == (first, "order.created", 1)
    assert queue.ack(lease)
    lease = queue.claim()
    assert lease is not None
    assert lease.message_id == second


def test_dead_letters_redrive_tail_publishes_anew(cli: Cli, queue: Transport) -> None:
    first = queue.publish("tenant-x", Event(kind="order.created"))
    second = queue.publish("tenant-x", Event(kind="order.shipped"))
    lease = queue.claim()
    assert lease is not None
    assert queue.dead_letter(lease, "rejected")
    result = cli("dead-letters", "redrive", "--all", "--tail")
    assert (result.code, result.out.strip()) == (0, "re-published 1 dead letter at the tail")
    lease = queue.claim()
    assert lease is not None
    assert lease.message_id == second
    assert queue.ack(lease)
    lease = queue.claim()
    assert lease is not None
    assert lease.event.kind == "order.created"
    assert lease.message_id > second > first


def test_dead_letters_delete(cli: Cli, queue: Transport) -> None:
    kept, dropped = _dead_letter(queue, "a"), _dead_letter(queue, "b")
    result = cli("dead-letters", "delete", str(dropped), str(dropped + 100))
    assert (result.code, result.out.strip()) == (
        0,
        "deleted 1 dead letter (1 of the ids did not exist)",
    )
    assert [letter.id for letter in queue.dead_letters()] == [kept]
    none = cli("dead-letters", "delete", str(dropped))
    assert none.code == 1
    assert "has none of these dead letters" in none.error_line()
    usage = cli("dead-letters", "delete")
    assert usage.code == 2
    usage.error_line()
