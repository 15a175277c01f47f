"""The chaos checks catch each broken guarantee (so a green chaos run means something)."""

from __future__ import annotations

from typing import Any

from pgque_chaos.checks import judge

VIS = 1.0


def claim(token: str, mid: int, at: float, attempt: int = 1, g: str = "a") -> dict[str, Any]:
    return {
        "k": "claim", "t": at, "token": token, "mid": mid, "g": g,
        "attempt": attempt, "exp": at + VIS, "vis": VIS,
    }  # fmt: skip


def run(
    token: str, mid: int, seq: int, enter: float, exit_: float | None, g: str = "a"
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"k": "enter", "t": enter, "token": token, "mid": mid, "g": g, "seq": seq}
    ]
    if exit_ is not None:
        out.append({"k": "exit", "t": exit_, "token": token, "mid": mid})
    return out


def ack(token: str, at: float, ok: bool = True) -> dict[str, Any]:
    return {"k": "ack", "t": at, "token": token, "ok": ok}


PUBLISHED = {1: ("a", 0), 2: ("a", 1)}


def happy() -> list[dict[str, Any]]:
    return [
        claim("t1", 1, 10.0),
        *run("t1", 1, 0, 10.01, 10.02),
        ack("t1", 10.03),
        claim("t2", 2, 10.04),
        *run("t2", 2, 1, 10.05, 10.06),
        ack("t2", 10.07),
    ]


def test_a_clean_run_passes() -> None:
    verdict = judge(happy(), PUBLISHED)
    assert verdict.ok, verdict.violations
    assert (verdict.processed, verdict.duplicates, verdict.lost) == (2, 0, 0)


def test_a_message_never_completed_is_lost() -> None:
    records = happy()[:3]
    verdict = judge(records, PUBLISHED)
    assert verdict.lost == 1
    assert not verdict.ok


def test_messages_left_in_the_queue_are_lost() -> None:
    verdict = judge(happy(), PUBLISHED, remaining_messages=3)
    assert verdict.lost == 3
    assert not verdict.ok


def test_redelivery_after_expiry_is_a_duplicate_not_a_violation() -> None:
    records = [
        claim("t1", 1, 10.0),
        *run("t1", 1, 0, 10.01, 11.5),  # slower than its 1 s lease
        claim("t1b", 1, 11.2, attempt=2),
        *run("t1b", 1, 0, 11.21, 11.22),
        ack("t1b", 11.23),
        ack("t1", 11.51, ok=False),  # the stale ack is fenced out
        claim("t2", 2, 11.3),
        *run("t2", 2, 1, 11.31, 11.32),
        ack("t2", 11.33),
    ]
    verdict = judge(records, PUBLISHED)
    assert verdict.ok, verdict.violations
    assert (verdict.duplicates, verdict.fenced_acks, verdict.leases_overrun) == (1, 1, 1)


def test_a_stale_ack_that_succeeds_is_a_violation() -> None:
    records = [
        claim("t1", 1, 10.0),
        *run("t1", 1, 0, 10.01, 11.5),
        claim("t1b", 1, 11.2, attempt=2),
        *run("t1b", 1, 0, 11.21, 11.22),
        ack("t1", 11.51, ok=True),
    ]
    verdict = judge(records, {1: ("a", 0)})
    assert any("after its ack succeeded" in v for v in verdict.violations)


def test_a_claim_of_a_live_lease_is_a_violation() -> None:
    records = [
        claim("t1", 1, 10.0),
        *run("t1", 1, 0, 10.01, 10.2),
        claim("t1b", 1, 10.1, attempt=2),  # 0.9 s before t1 expires
        *run("t1b", 1, 0, 10.11, 10.12),
        ack("t1b", 10.13),
    ]
    verdict = judge(records, {1: ("a", 0)})
    assert any("before the previous lease" in v for v in verdict.violations)
    assert any("entered" in v for v in verdict.violations)  # and the handlers overlapped


def test_two_messages_of_a_group_handled_at_once_is_a_violation() -> None:
    records = [
        claim("t1", 1, 10.0),
        claim("t2", 2, 10.001),
        *run("t1", 1, 0, 10.01, 10.05),
        *run("t2", 2, 1, 10.02, 10.06),
        ack("t1", 10.07),
        ack("t2", 10.08),
    ]
    verdict = judge(records, PUBLISHED)
    assert any("entered" in v for v in verdict.violations)


def test_out_of_order_first_completions_are_a_violation() -> None:
    records = [
        claim("t2", 2, 10.0),
        *run("t2", 2, 1, 10.01, 10.02),
        ack("t2", 10.03),
        claim("t1", 1, 10.04),
        *run("t1", 1, 0, 10.05, 10.06),
        ack("t1", 10.07),
    ]
    verdict = judge(records, PUBLISHED)
    assert any("first completed after" in v for v in verdict.violations)


def test_a_killed_holder_counts_until_its_lease_expires() -> None:
    records = [
        claim("t1", 1, 10.0),
        *run("t1", 1, 0, 10.01, None),  # killed mid-handler
        claim("t1b", 1, 11.0, attempt=2),
        *run("t1b", 1, 0, 11.01, 11.02),
        ack("t1b", 11.03),
    ]
    verdict = judge(records, {1: ("a", 0)})
    assert verdict.ok, verdict.violations
    assert (verdict.unfinished_handlers, verdict.redeliveries) == (1, 1)


def test_a_claim_reply_lost_in_flight_is_counted_not_a_violation() -> None:
    records = [
        claim("t1", 1, 10.0, attempt=2),  # attempt 1 was granted but never reached a worker
        *run("t1", 1, 0, 10.01, 10.02),
        ack("t1", 10.03),
    ]
    verdict = judge(records, {1: ("a", 0)})
    assert verdict.ok, verdict.violations
    assert verdict.claims_lost_in_flight == 1


def test_an_extension_keeps_the_lease_valid() -> None:
    records = [
        claim("t1", 1, 10.0),
        {"k": "extend", "t": 10.5, "token": "t1", "exp": 11.5},
        *run("t1", 1, 0, 10.01, 11.2),
        claim("t1b", 1, 11.1, attempt=2),  # inside the extended lease: a violation
        *run("t1b", 1, 0, 11.11, 11.12),
        ack("t1b", 11.13),
    ]
    verdict = judge(records, {1: ("a", 0)})
    assert any("before the previous lease" in v for v in verdict.violations)


def test_a_group_leased_again_under_a_live_unsettled_lease_is_a_violation() -> None:
    records = [
        claim("t1", 1, 10.0),
        *run("t1", 1, 0, 10.01, None),  # its handler never returned: no ack was possible
        claim("t2", 2, 10.5),  # message 2 of the same group, 0.5 s before t1 expires
        *run("t2", 2, 1, 11.2, 11.3),
        ack("t2", 11.4),
    ]
    verdict = judge(records, PUBLISHED)
    assert any("leased again" in v for v in verdict.violations)


def test_a_released_lease_is_claimed_again_at_the_same_attempt() -> None:
    """A worker stopping gives its message back with ``release``: the delivery does not
    count, so the next claim carries the same attempt, at once (no expiry to wait for)."""
    records = [
        claim("t1", 1, 10.0),
        *run("t1", 1, 0, 10.01, 10.015),  # its result discarded: the worker was stopping
        {"k": "release", "t": 10.02, "token": "t1", "ok": True},
        claim("t1b", 1, 10.03, attempt=1),
        *run("t1b", 1, 0, 10.04, 10.05),
        ack("t1b", 10.06),
        claim("t2", 2, 10.07),
        *run("t2", 2, 1, 10.08, 10.09),
        ack("t2", 10.1),
    ]
    verdict = judge(records, PUBLISHED)
    assert verdict.ok, verdict.violations
    assert verdict.claims_lost_in_flight == 0


def test_the_same_attempt_again_without_a_release_is_a_violation() -> None:
    records = [
        claim("t1", 1, 10.0),
        *run("t1", 1, 0, 10.01, 10.015),
        {"k": "nack", "t": 10.02, "token": "t1", "ok": True},
        claim("t1b", 1, 10.03, attempt=1),
        *run("t1b", 1, 0, 10.04, 10.05),
        ack("t1b", 10.06),
    ]
    verdict = judge(records, {1: ("a", 0)})
    assert any("attempt 1 claimed after attempt 1" in v for v in verdict.violations)


def nack(token: str, at: float, ok: bool = True) -> dict[str, Any]:
    return {"k": "nack", "t": at, "token": token, "ok": ok}


def test_a_handler_that_raised_holds_the_group_until_its_nack() -> None:
    # t1's handler raised (no exit); its nack gave the group back at 10.10, long before its
    # lease would have expired: the retry entering after the nack is no overlap.
    retried = [
        claim("t1", 1, 10.0),
        *run("t1", 1, 0, 10.01, None),
        nack("t1", 10.10),
        claim("t1b", 1, 10.11, attempt=2),
        *run("t1b", 1, 0, 10.12, 10.13),
        ack("t1b", 10.14),
    ]
    assert judge(retried, {1: ("a", 0)}).ok
    # The same retry entering before the nack succeeded overlaps the raising handler.
    early = [
        *retried[:2],
        claim("t1b", 1, 10.05, attempt=2),
        *run("t1b", 1, 0, 10.06, 10.07),
        ack("t1b", 10.08),
        nack("t1", 10.10),
    ]
    verdict = judge(early, {1: ("a", 0)})
    assert any("entered" in v for v in verdict.violations), verdict.violations
    # A nack the store refused (the lease was already gone) ends nothing.
    refused = [*retried[:2], nack("t1", 10.10, ok=False), *retried[3:]]
    verdict = judge(refused, {1: ("a", 0)})
    assert any("entered" in v for v in verdict.violations), verdict.violations


def sending(token: str, op: str, at: float) -> dict[str, Any]:
    return {"k": "sending", "t": at, "token": token, "op": op}


def test_a_release_sent_by_a_worker_killed_before_its_reply_may_have_happened() -> None:
    # The worker sent a release of t1 (its handler never started) and was killed before the
    # reply: no result recorded. The store did it, so the next claim repeats attempt 1 early.
    records = [
        claim("t1", 1, 10.0),
        sending("t1", "release", 10.01),
        claim("t1b", 1, 10.05, attempt=1),
        *run("t1b", 1, 0, 10.06, 10.07),
        ack("t1b", 10.08),
    ]
    assert judge(records, {1: ("a", 0)}).ok
    # Without the record of the send it is a reclaim of a live lease at the same attempt.
    verdict = judge([records[0], *records[2:]], {1: ("a", 0)})
    assert any("attempt 1 claimed after attempt 1" in v for v in verdict.violations)
    # A send the store refused (answered False) did nothing.
    refused = [*records[:2], {"k": "release", "t": 10.02, "token": "t1", "ok": False}]
    verdict = judge([*refused, *records[2:]], {1: ("a", 0)})
    assert any("attempt 1 claimed after attempt 1" in v for v in verdict.violations)


def test_a_nack_sent_ends_the_raising_handlers_span() -> None:
    # The handler raised; the worker sent its nack and was killed before the reply.
    records = [
        claim("t1", 1, 10.0),
        *run("t1", 1, 0, 10.01, None),
        sending("t1", "nack", 10.02),
        claim("t1b", 1, 10.05, attempt=2),
        *run("t1b", 1, 0, 10.06, 10.07),
        ack("t1b", 10.08),
    ]
    assert judge(records, {1: ("a", 0)}).ok, judge(records, {1: ("a", 0)}).violations


CAPS = {"a": ("k0", 1), "b": ("k0", 1), "c": ("k1", 2)}


def test_more_handlers_of_a_key_than_its_cap_at_once_is_a_violation() -> None:
    published = {1: ("a", 0), 2: ("b", 0), 3: ("c", 0)}
    one_at_a_time = [
        claim("t1", 1, 10.0, g="a"),
        *run("t1", 1, 0, 10.01, 10.05, g="a"),
        ack("t1", 10.06),
        claim("t2", 2, 10.07, g="b"),
        *run("t2", 2, 0, 10.08, 10.1, g="b"),
        ack("t2", 10.11),
        claim("t3", 3, 10.0, g="c"),  # another key: not counted with k0
        *run("t3", 3, 0, 10.01, 10.2, g="c"),
        ack("t3", 10.21),
    ]
    assert judge(one_at_a_time, published, group_caps=CAPS).ok
    overlapping = [
        claim("t1", 1, 10.0, g="a"),
        claim("t2", 2, 10.001, g="b"),
        *run("t1", 1, 0, 10.01, 10.05, g="a"),
        *run("t2", 2, 0, 10.02, 10.06, g="b"),
        ack("t1", 10.07),
        ack("t2", 10.08),
    ]
    verdict = judge(overlapping, {1: ("a", 0), 2: ("b", 0)}, group_caps=CAPS)
    assert any("key k0: 2 handlers running at once (cap 1)" in v for v in verdict.violations)
    # Without caps to check, the same records break nothing.
    assert judge(overlapping, {1: ("a", 0), 2: ("b", 0)}).ok


def test_a_holder_past_its_lease_no_longer_takes_a_slot() -> None:
    # t1's handler overran its 1 s lease; the slot was free again from 11.0 on.
    records = [
        claim("t1", 1, 10.0, g="a"),
        *run("t1", 1, 0, 10.01, 11.5, g="a"),
        claim("t2", 2, 11.2, g="b"),
        *run("t2", 2, 0, 11.21, 11.3, g="b"),
        ack("t2", 11.31),
        ack("t1", 11.51),
    ]
    verdict = judge(records, {1: ("a", 0), 2: ("b", 0)}, group_caps=CAPS)
    assert not any("handlers running at once" in v for v in verdict.violations)
