"""Judge a chaos run from what the workers recorded, never from what the queue says of itself.

The records (see :mod:`pgque_chaos.worker`) are JSON objects with a kind ``k``:

- ``claim``: a lease was granted: ``token``, ``mid`` (message id), ``g``, ``attempt``, ``exp``
  (expiry, epoch seconds by the server's clock) and ``vis`` (the visibility asked for);
- ``extend``: a renewal returned ``exp`` (None: the lease was found lost);
- ``enter`` / ``exit``: a handler started / returned (``t``: real time);
- ``ack`` / ``nack`` / ``release``: a settlement returned ``ok`` (a release gives the message
  back without counting the attempt: the next claim carries the same attempt).

The servers run on this machine, so their clock and the records' ``t`` are one clock.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Verdict", "judge", "TOLERANCE_S"]

#: Slack for comparing times taken by different processes (float rounding of the servers'
#: microsecond clocks). Far below any lease in the scenarios.
TOLERANCE_S = 0.002


@dataclass
class Verdict:
    """The numbers of one run and every violation found (each a short sentence)."""

    events: int = 0
    processed: int = 0
    lost: int = 0
    duplicates: int = 0
    redeliveries: int = 0
    fenced_acks: int = 0
    unfinished_handlers: int = 0
    claims_lost_in_flight: int = 0
    #: handlers that returned after their lease had expired (a handler slower than its lease)
    leases_overrun: int = 0
    transport_errors: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Return True when nothing was lost and no guarantee was broken."""
        return self.lost == 0 and not self.violations


@dataclass
class _Claim:
    token: str
    mid: int
    group: str
    attempt: int
    at: float  # when the server granted it (its clock)
    until: float  # the latest expiry the holder was told of
    acked: bool | None = None
    nacked: bool = False
    released: bool = False
    enter: float | None = None
    exit: float | None = None
    #: when a nack, release or dead-letter of this lease was sent (its handler, if it ran,
    #: had returned or raised: a handler that raised records no exit, its span ends here)
    settled: float | None = None
    #: the nacks, releases and dead-letters sent for this lease, and whether the store
    #: refused one (answered False): a worker killed before the reply recorded no result,
    #: though the store may have done it
    sent: set[str] = field(default_factory=set)
    refused: bool = False

    def maybe_settled(self) -> bool:
        """True if a nack, release or dead-letter succeeded or may have (sent, no refusal)."""
        return self.nacked or (bool(self.sent) and not self.refused)

    def maybe_released(self) -> bool:
        """True if a release succeeded or may have (sent, not refused)."""
        return self.released or ("release" in self.sent and not self.refused)


def judge(
    records: Iterable[Mapping[str, Any]],
    published: Mapping[int, tuple[str, int]],
    *,
    remaining_messages: int = 0,
    dead_letters: int = 0,
    group_caps: Mapping[str, tuple[str, int]] | None = None,
) -> Verdict:
    """Check the guarantees over *records* for the messages in *published* (id -> group, seq).

    *remaining_messages* and *dead_letters* are the queue's counts after the run: both must be
    0 (the handlers never fail, so a dead letter is a loss). *group_caps* maps each group to
    its fairness key and the key's ``max_in_flight``: no more handlers of a key may run at once
    while their leases are valid.
    """
    verdict = Verdict(events=len(published))
    claims: dict[str, _Claim] = {}
    problems = verdict.violations
    for rec in sorted(records, key=lambda r: float(r["t"])):
        kind = rec["k"]
        if kind == "claim":
            exp = float(rec["exp"])
            claims[rec["token"]] = _Claim(
                rec["token"], int(rec["mid"]), str(rec["g"]), int(rec["attempt"]),
                exp - float(rec["vis"]), exp,
            )  # fmt: skip
            continue
        if kind == "err":
            op = str(rec["op"])
            verdict.transport_errors[op] = verdict.transport_errors.get(op, 0) + 1
            continue
        claim = claims.get(rec.get("token", ""))
        if kind in {"start", "stop"} or "token" not in rec:
            continue
        if claim is None:
            problems.append(f"{kind} of token {rec['token']} that no claim granted")
            continue
        if kind == "extend" and rec["exp"] is not None:
            claim.until = max(claim.until, float(rec["exp"]))
        elif kind == "enter":
            claim.enter = float(rec["t"])
            if (str(rec["g"]), rec["seq"]) != published.get(claim.mid, (claim.group, None)):
                problems.append(f"message {claim.mid} carried group/seq {rec['g']}/{rec['seq']}")
        elif kind == "exit":
            claim.exit = float(rec["t"])
        elif kind == "sending":
            claim.sent.add(str(rec["op"]))
            if claim.settled is None:
                claim.settled = float(rec["t"])
        elif kind == "ack":
            claim.acked = bool(rec["ok"])
            verdict.fenced_acks += not rec["ok"]
        elif kind in {"nack", "dead_letter", "release"}:
            claim.nacked = claim.nacked or bool(rec["ok"])
            claim.refused = claim.refused or not rec["ok"]
            if rec["ok"] and claim.settled is None:
                claim.settled = float(rec["t"])
            claim.released = claim.released or (kind == "release" and bool(rec["ok"]))
            if kind == "dead_letter" and rec["ok"]:
                problems.append(f"message {claim.mid} was dead-lettered")

    by_message: dict[int, list[_Claim]] = defaultdict(list)
    for claim in claims.values():
        by_message[claim.mid].append(claim)
        if claim.mid not in published:
            problems.append(f"message {claim.mid} was delivered but never published")
    _deliveries(by_message, verdict)
    _completions(by_message, published, verdict)
    _exclusive(claims.values(), problems)
    _group_leases(claims.values(), problems)
    if group_caps:
        _capped(claims.values(), group_caps, problems)
    verdict.leases_overrun = sum(
        c.exit is not None and c.exit > c.until + TOLERANCE_S for c in claims.values()
    )
    if remaining_messages:
        verdict.lost += remaining_messages
        problems.append(f"{remaining_messages} messages still in the queue at the end")
    if dead_letters:
        problems.append(f"{dead_letters} dead letters at the end")
    return verdict


def _deliveries(by_message: Mapping[int, list[_Claim]], verdict: Verdict) -> None:
    """A message is claimed again only after its previous lease was lost, never after an ack."""
    problems = verdict.violations
    for mid, chain in by_message.items():
        chain.sort(key=lambda c: (c.at, c.attempt))
        verdict.redeliveries += len(chain) - 1
        verdict.claims_lost_in_flight += chain[0].attempt - 1
        for before, after in itertools.pairwise(chain):
            verdict.claims_lost_in_flight += max(after.attempt - before.attempt - 1, 0)
            # a release does not count its delivery: the next claim repeats its attempt
            floor = before.attempt - 1 if before.maybe_released() else before.attempt
            if after.attempt <= floor:
                problems.append(
                    f"message {mid}: attempt {after.attempt} claimed after attempt {before.attempt}"
                )
            if before.acked:
                problems.append(f"message {mid} delivered again after its ack succeeded")
            elif not before.maybe_settled() and after.at < before.until - TOLERANCE_S:
                problems.append(
                    f"message {mid} claimed again {before.until - after.at:.3f}s before the "
                    f"previous lease (attempt {before.attempt}) expired"
                )


def _completions(
    by_message: Mapping[int, list[_Claim]],
    published: Mapping[int, tuple[str, int]],
    verdict: Verdict,
) -> None:
    """Every message completed at least once; per group, first completions in publish order."""
    first_done: dict[str, list[tuple[float, int, int]]] = defaultdict(list)
    for mid, (group, seq) in published.items():
        chain = by_message.get(mid, [])
        exits = sorted(c.exit for c in chain if c.exit is not None)
        verdict.unfinished_handlers += sum(c.enter is not None and c.exit is None for c in chain)
        if not exits:
            verdict.lost += 1
            verdict.violations.append(f"message {mid} ({group}/{seq}) never completed")
            continue
        verdict.processed += 1
        verdict.duplicates += len(exits) - 1
        first_done[group].append((exits[0], seq, mid))
    for group, done in first_done.items():
        done.sort()
        seqs = [seq for _, seq, _ in done]
        if seqs != sorted(seqs):
            at = next(i for i in range(1, len(seqs)) if seqs[i] < seqs[i - 1])
            verdict.violations.append(
                f"group {group}: seq {seqs[at]} first completed after seq {seqs[at - 1]}"
            )


def _exclusive(claims: Iterable[_Claim], problems: list[str]) -> None:
    """No two handlers of one group run at once while both hold a valid lease.

    A holder's interval runs from its handler's entry to its exit (a handler that raised: to
    its lease's nack or release; killed: for ever) but counts only while its lease is valid: it
    ends at the latest expiry the holder was told of.
    """
    spans: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for claim in claims:
        if claim.enter is None:
            continue
        stop = claim.exit if claim.exit is not None else claim.settled
        end = claim.until if stop is None else min(stop, claim.until)
        spans[claim.group].append((claim.enter, end, claim.token))
    for group, items in spans.items():
        items.sort()
        reach, holder = float("-inf"), ""
        for start, end, token in items:
            if start < reach - TOLERANCE_S:
                problems.append(
                    f"group {group}: {token} entered {reach - start:.3f}s before the valid "
                    f"lease of {holder} ended"
                )
            if end > reach:
                reach, holder = end, token


def _group_leases(claims: Iterable[_Claim], problems: list[str]) -> None:
    """By the server's clock: a group is not leased again while an unsettled lease is valid.

    Only a lease whose handler never returned (and was not released) is surely unsettled: a
    worker acks after its handler returns, and a killed worker may have acked without
    recording it.
    """
    by_group: dict[str, list[_Claim]] = defaultdict(list)
    for claim in claims:
        by_group[claim.group].append(claim)
    for group, chain in by_group.items():
        chain.sort(key=lambda c: c.at)
        for before, after in itertools.pairwise(chain):
            unsettled = before.exit is None and not before.maybe_settled()
            if unsettled and after.at < before.until - TOLERANCE_S:
                problems.append(
                    f"group {group} leased again (message {after.mid}) "
                    f"{before.until - after.at:.3f}s before the lease on message {before.mid} "
                    "expired"
                )


def _capped(
    claims: Iterable[_Claim], group_caps: Mapping[str, tuple[str, int]], problems: list[str]
) -> None:
    """Per fairness key, no more handlers at once than its cap while their leases are valid.

    A handler's span is the one :func:`_exclusive` uses (entry to exit, to its nack or release
    when it raised, for ever when killed, each cut at its lease's last known expiry), less
    ``TOLERANCE_S`` at its end: the next holder of a slot enters only after the previous one's
    settlement, which the previous one sent after its exit.
    """
    edges: dict[str, list[tuple[float, int, str]]] = defaultdict(list)
    for claim in claims:
        if claim.enter is None or claim.group not in group_caps:
            continue
        stop = claim.exit if claim.exit is not None else claim.settled
        end = (claim.until if stop is None else min(stop, claim.until)) - TOLERANCE_S
        if end <= claim.enter:
            continue
        key = group_caps[claim.group][0]
        edges[key].append((claim.enter, 1, claim.token))
        edges[key].append((end, -1, claim.token))
    caps = dict(group_caps.values())
    for key, items in edges.items():
        items.sort(key=lambda edge: (edge[0], edge[1]))  # an end before a start at one instant
        running, worst = 0, 0
        for at, step, token in items:
            running += step
            if running > caps[key] and running > worst:
                worst = running
                problems.append(
                    f"key {key}: {running} handlers running at once (cap {caps[key]}) when "
                    f"{token} entered at {at:.3f}"
                )
