"""A mixed-operation stress run over any blocking transport, with checks that cannot be fooled
by timing.

Threads pick operations at random — publish, publish_many, claim, claim_many, ack, ack_many,
nack with and without a delay, extend, dead_letter, abandoning a lease to expiry, redrive,
unblock, stats, purge of a second queue — plus the optional hooks a backend's test passes in
(transactional publish with commit or rollback, deduplicated publish, a Tier A key lock). Then
the queue is drained and :meth:`StressReport.check` verifies:

- no operation raised (no deadlock, no ``RetryableConflict``, no driver error);
- nothing orphaned, no phantom group: after the drain ``stats()`` shows no message and no
  group, on both queues (an orphan message can never be claimed; a phantom row is a group
  with no message);
- every committed message was acked exactly once or is a dead letter, never both; no message
  of a rolled-back transaction or a deduplicated repeat was ever delivered;
- FIFO per group, judged by intervals so thread scheduling cannot fake a result: a claim of
  message ``m2`` that *ended* before the removal (a successful ack or dead_letter) of an
  earlier message ``m1`` of its group *started* proves ``m2`` was leased while ``m1`` was
  still queued (only ``m1``'s first removal counts: an in-place redrive puts it back later);
- a dedup key appends once (one ``deduped=False`` per key, every repeat gets its id);
- a Tier A key is never held by two threads at once.

Everything is bounded: a wall-clock budget for the random phase and for the drain.
"""

from __future__ import annotations

import bisect
import random
import threading
import time
import traceback
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from pgque.core import Event, Lease, SupportsPurge, Transport

__all__ = ["StressHooks", "StressReport", "run_stress"]

#: ``tx_publish(items, commit)``: publish *items* in one transaction; commit or roll back.
#: Returns the message ids when committed, None when rolled back.
TxPublish = Callable[[Sequence[tuple[str, Event]], bool], "list[int] | None"]
#: ``dedup_send(group_key, event, dedup_key)``: a deduplicated publish; (id, deduped, group).
DedupSend = Callable[[str, Event, str], "tuple[int, bool, str]"]
#: ``key_lock(key)``: a context manager yielding a truthy grant when the key was taken.
KeyLock = Callable[[str], AbstractContextManager[Any]]


@dataclass
class StressHooks:
    """Backend-specific operations a stress run mixes in (each optional)."""

    tx_publish: TxPublish | None = None
    dedup_send: DedupSend | None = None
    key_lock: KeyLock | None = None


@dataclass
class _Removal:
    message_id: int
    started: float


@dataclass
class StressReport:
    """What a run did and saw; :meth:`check` raises AssertionError on any broken promise."""

    ops: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    committed: dict[str, int] = field(default_factory=dict)  # uid -> message id
    group_of: dict[int, str] = field(default_factory=dict)  # message id -> group
    never_delivered: set[str] = field(default_factory=set)  # rolled back / deduped uids
    acked: Counter[str] = field(default_factory=Counter)  # uid -> successful acks
    dead: Counter[str] = field(default_factory=Counter)  # uid -> dead letters at the end
    claims: list[tuple[str, int, float]] = field(default_factory=list)  # group, id, ended
    removals: dict[str, list[_Removal]] = field(default_factory=lambda: defaultdict(list))
    dedup_results: dict[str, list[tuple[int, bool]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    lock_overlaps: int = 0
    final_stats: dict[str, tuple[int, int]] = field(default_factory=dict)  # queue -> (g, m)
    delivered_unknown: list[str] = field(default_factory=list)

    def check(self) -> None:
        """Raise AssertionError naming every promise this run saw broken."""
        problems: list[str] = []
        if self.failures:
            kinds = Counter(f.strip().splitlines()[-1][:160] for f in self.failures)
            problems.append(
                f"{len(self.failures)} operations raised: {dict(kinds)}; first: {self.failures[0]}"
            )
        for queue, (groups, messages) in self.final_stats.items():
            if groups or messages:
                problems.append(
                    f"queue {queue!r} after the drain: {groups} groups, {messages} messages "
                    "(a phantom group row or an orphan message)"
                )
        for uid in self.committed:
            acks, dead = self.acked[uid], self.dead[uid]
            if acks + dead != 1:
                problems.append(f"message {uid}: acked {acks} times, {dead} dead letters")
        stray = [u for u in self.acked if u not in self.committed] + self.delivered_unknown
        if stray:
            problems.append(f"{len(stray)} deliveries of uncommitted messages, e.g. {stray[:3]}")
        problems += self._fifo_violations()
        for key, results in self.dedup_results.items():
            fresh = [r for r in results if not r[1]]
            if len(fresh) != 1 or len({r[0] for r in results}) != 1:
                problems.append(f"dedup key {key!r}: results {results}")
        if self.lock_overlaps:
            problems.append(f"a Tier A key was held twice at once {self.lock_overlaps} times")
        assert not problems, "\n".join(problems)

    def _fifo_violations(self) -> list[str]:
        out: list[str] = []
        for group, recorded in self.removals.items():
            # Only a message's first removal proves it was queued until then: an in-place
            # redrive puts it back under its id, and a lease taken on a later message while
            # it was a dead letter is no overtaking.
            first: dict[int, _Removal] = {}
            for r in recorded:
                if r.message_id not in first or r.started < first[r.message_id].started:
                    first[r.message_id] = r
            removals = sorted(first.values(), key=lambda r: r.message_id)
            ids = [r.message_id for r in removals]
            # latest[i]: the latest removal start among the i+1 smallest ids.
            latest: list[float] = []
            for r in removals:
                latest.append(max(r.started, latest[-1]) if latest else r.started)
            self.removals[group] = removals
            for claim_group, message_id, ended in self.claims:
                if claim_group != group:
                    continue
                i = bisect.bisect_left(ids, message_id)
                if i and latest[i - 1] > ended:
                    out.append(
                        f"group {group!r}: message {message_id} leased while an earlier "
                        "message was still queued"
                    )
                    if len(out) > 5:
                        return out
        return out


def _uid(event: Event) -> str:
    data = event.data
    return str(data["uid"]) if isinstance(data, dict) and "uid" in data else "?"


class _Run:
    def __init__(
        self,
        transport: Transport,
        scratch: Transport,
        hooks: StressHooks,
        groups: Sequence[str],
        seed: int,
        visibility: float,
    ) -> None:
        self.t = transport
        self.scratch = scratch
        if not isinstance(scratch, SupportsPurge):
            raise TypeError("the scratch transport of a stress run must support purge()")
        self.purge_scratch = scratch.purge
        self.hooks = hooks
        self.groups = list(groups)
        self.seed = seed
        self.visibility = visibility
        self.report = StressReport()
        self.mutex = threading.Lock()
        self.holders: Counter[str] = Counter()
        self.dedup_keys = [f"effect-{i}" for i in range(12)]

    # ---------------------------------------------------------------- bookkeeping

    def _event(self, group: str) -> Event:
        return Event(kind="stress", data={"uid": uuid.uuid4().hex, "g": group})

    def _committed(self, items: Sequence[tuple[str, Event]], ids: Sequence[int]) -> None:
        with self.mutex:
            for (group, event), message_id in zip(items, ids, strict=True):
                self.report.committed[_uid(event)] = message_id
                self.report.group_of[message_id] = group

    def _claimed(self, leases: Sequence[Lease], ended: float) -> None:
        with self.mutex:
            for lease in leases:
                self.report.claims.append((lease.group_id, lease.message_id, ended))
                if _uid(lease.event) in self.report.never_delivered:
                    self.report.delivered_unknown.append(_uid(lease.event))

    def _removed(self, lease: Lease, started: float, acked: bool) -> None:
        with self.mutex:
            self.report.removals[lease.group_id].append(_Removal(lease.message_id, started))
            if acked:
                self.report.acked[_uid(lease.event)] += 1

    # ---------------------------------------------------------------- operations

    def op_publish(self, rng: random.Random) -> None:
        group = rng.choice(self.groups)
        event = self._event(group)
        self._committed([(group, event)], [self.t.publish(group, event)])

    def op_publish_many(self, rng: random.Random) -> None:
        items = [(g, self._event(g)) for g in rng.choices(self.groups, k=rng.randint(2, 6))]
        self._committed(items, self.t.publish_many(items))

    def op_tx_publish(self, rng: random.Random) -> None:
        assert self.hooks.tx_publish is not None
        chosen = rng.sample(self.groups, rng.randint(1, 3))
        # One order for every transaction: opposite orders may deadlock by design.
        items = [(g, self._event(g)) for g in sorted(chosen)]
        commit = rng.random() < 0.6
        if not commit:
            with self.mutex:
                self.report.never_delivered.update(_uid(e) for _, e in items)
        ids = self.hooks.tx_publish(items, commit)
        if ids is not None:
            self._committed(items, ids)

    def op_dedup(self, rng: random.Random) -> None:
        assert self.hooks.dedup_send is not None
        key = rng.choice(self.dedup_keys)
        group_key = rng.choice(self.groups)
        event = self._event(group_key)
        message_id, deduped, group = self.hooks.dedup_send(group_key, event, key)
        with self.mutex:
            self.report.dedup_results[key].append((message_id, deduped))
            if deduped:
                # Never appended: a delivery of it shows up as an ack of an uncommitted uid.
                self.report.never_delivered.add(_uid(event))
            else:
                self.report.committed[_uid(event)] = message_id
                self.report.group_of[message_id] = group

    def op_claim(self, rng: random.Random) -> None:
        if rng.random() < 0.5:
            lease = self.t.claim(self.visibility)
            leases = [] if lease is None else [lease]
        else:
            leases = self.t.claim_many(rng.randint(2, 8), self.visibility)
        self._claimed(leases, time.monotonic())
        if len(leases) > 1 and rng.random() < 0.4:
            started = time.monotonic()
            for lease, ok in zip(leases, self.t.ack_many(leases), strict=True):
                if ok:
                    self._removed(lease, started, acked=True)
            return
        for lease in leases:
            self._settle(rng, lease)

    def _settle(self, rng: random.Random, lease: Lease) -> None:
        roll = rng.random()
        if roll < 0.08:
            return  # abandoned: it expires and is redelivered
        if roll < 0.18:
            self.t.nack(lease)
            return
        if roll < 0.26:
            self.t.nack(lease, delay=rng.uniform(0.01, 0.15))
            return
        if roll < 0.32:
            started = time.monotonic()
            if self.t.dead_letter(lease, "stress"):
                self._removed(lease, started, acked=False)
            return
        if roll < 0.40:
            renewed = self.t.extend(lease, self.visibility)
            lease = renewed if renewed is not None else lease
        started = time.monotonic()
        if self.t.ack(lease):
            self._removed(lease, started, acked=True)

    def op_redrive(self, rng: random.Random) -> None:
        in_place = rng.random() < 0.7
        if rng.random() < 0.5:
            self.t.redrive(in_place=in_place)
            return
        letters = self.t.dead_letters(limit=20)
        if letters:
            chosen = [d.id for d in rng.sample(letters, min(3, len(letters)))]
            self.t.redrive(chosen, in_place=in_place)

    def op_unblock(self, rng: random.Random) -> None:
        self.t.unblock(rng.choice(self.groups), drop_head=False)

    def op_stats(self, rng: random.Random) -> None:
        stats = self.t.stats()
        assert min(stats.groups, stats.messages, stats.in_flight, stats.dead_letters) >= 0

    def op_scratch(self, rng: random.Random) -> None:
        """Churn a second queue and purge it while others publish and claim there."""
        roll = rng.random()
        if roll < 0.1:
            self.purge_scratch()
        elif roll < 0.55:
            group = f"s{rng.randint(0, 5)}"
            self.scratch.publish(group, Event(kind="scratch"))
        else:
            for lease in self.scratch.claim_many(3, self.visibility):
                self.scratch.ack(lease)

    def op_key_lock(self, rng: random.Random) -> None:
        assert self.hooks.key_lock is not None
        key = f"tenant-{rng.randint(0, 3)}"
        with self.hooks.key_lock(key) as grant:
            if not grant:
                return
            with self.mutex:
                self.holders[key] += 1
                if self.holders[key] > 1:
                    self.report.lock_overlaps += 1
            time.sleep(rng.uniform(0, 0.003))
            with self.mutex:
                self.holders[key] -= 1

    def operations(self) -> list[tuple[str, float, Callable[[random.Random], None]]]:
        ops: list[tuple[str, float, Callable[[random.Random], None]]] = [
            ("publish", 18, self.op_publish),
            ("publish_many", 8, self.op_publish_many),
            ("claim", 40, self.op_claim),
            ("redrive", 2, self.op_redrive),
            ("unblock", 3, self.op_unblock),
            ("stats", 1, self.op_stats),
            ("scratch", 6, self.op_scratch),
        ]
        if self.hooks.tx_publish is not None:
            ops.append(("tx_publish", 8, self.op_tx_publish))
        if self.hooks.dedup_send is not None:
            ops.append(("dedup", 4, self.op_dedup))
        if self.hooks.key_lock is not None:
            ops.append(("key_lock", 3, self.op_key_lock))
        return ops

    # ---------------------------------------------------------------- phases

    def worker(self, index: int, deadline: float) -> None:
        rng = random.Random(self.seed * 1000 + index)
        ops = self.operations()
        weights = [w for _, w, _ in ops]
        while time.monotonic() < deadline:
            name, _, op = rng.choices(ops, weights)[0]
            self.report.ops[name] += 1
            try:
                op(rng)
            except Exception:
                self.report.failures.append(f"{name}: {traceback.format_exc(limit=6)}")

    def drain(self, budget: float) -> None:
        """Claim and ack until both queues are empty (unblocking blocked groups), bounded."""
        deadline = time.monotonic() + budget
        while time.monotonic() < deadline:
            for group in self.groups:
                self.t.unblock(group)
            leases = self.t.claim_many(32, 30.0)
            self._claimed(leases, time.monotonic())
            started = time.monotonic()
            for lease, ok in zip(leases, self.t.ack_many(leases), strict=True):
                if ok:
                    self._removed(lease, started, acked=True)
            if leases:
                continue
            stats = self.t.stats()
            if stats.messages == 0 and stats.groups == 0:
                break
            time.sleep(0.05)  # parked groups and abandoned leases come due shortly
        self.purge_scratch()
        for queue in (self.t, self.scratch):
            stats = queue.stats()
            self.report.final_stats[queue.queue] = (stats.groups, stats.messages)
        for letter in _all_dead_letters(self.t):
            self.report.dead[_uid(letter.event)] += 1


def _all_dead_letters(transport: Transport) -> Iterator[Any]:
    # dead_letters() has no paging yet; a stress run leaves far fewer than its limit.
    letters = transport.dead_letters(limit=10_000)
    assert len(letters) < 10_000, "too many dead letters to account for"
    yield from letters


#: The groups a ``pgque.partition`` publisher with ``Ordered()`` uses for keys ``g0`` .. ``g23``.
DEFAULT_GROUPS = tuple(f"k:g{n}" for n in range(24))


def run_stress(
    transport: Transport,
    scratch: Transport,
    *,
    hooks: StressHooks | None = None,
    threads: int = 8,
    seconds: float = 20.0,
    groups: Sequence[str] = DEFAULT_GROUPS,
    visibility: float = 0.4,
    seed: int | None = None,
    drain_budget: float = 60.0,
) -> StressReport:
    """Run the mixed workload on *transport* (and purges on *scratch*, another queue), drain
    both, and return the report; call ``report.check()`` to assert every promise.

    *transport* must be opened with a small ``max_attempts`` and ``on_exhausted="block"``, so
    blocked groups and ``unblock`` take part and every removal of a message is one the run
    sees (an exhaustion dead letter made by a claim is not, and an in-place redrive of it
    would look like overtaking to the FIFO check). Group ids default to ``k:g<N>``, the groups a
    ``pgque.partition`` publisher with ``Ordered()`` uses for keys ``g<N>``.
    """
    run = _Run(
        transport,
        scratch,
        hooks or StressHooks(),
        groups,
        random.randrange(1 << 30) if seed is None else seed,
        visibility,
    )
    deadline = time.monotonic() + seconds
    pool = [
        threading.Thread(target=run.worker, args=(i, deadline), daemon=True) for i in range(threads)
    ]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(seconds + 60.0)
    run.drain(drain_budget)
    return run.report
