"""Run one fault scenario: publish a workload, run worker processes, inject the fault, judge.

The events are all published before the workers start (and before any fault): a publish
that returned is the promise under test. Then real worker processes drain the queue while the
harness injects its fault; once the queue is empty the workers are stopped with SIGTERM, their
records are read back and judged (:mod:`pgque_chaos.checks`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pgque.core.contract import SupportsFairness
from pgque.core.errors import PgqueError
from pgque.core.models import Event
from pgque.core.registry import connect
from pgque_chaos.checks import Verdict, judge
from pgque_chaos.proxy import ReplyDropper
from pgque_chaos.worker import WorkerSpec

__all__ = ["Scenario", "Outcome", "Server", "run_scenario"]

#: The libpq application_name of the workers' connections: what the harness cuts.
WORKER_APP = "pgque-chaos-worker"
HERE = Path(__file__).resolve().parent.parent


class Server(Protocol):
    """What the harness needs of a throwaway server."""

    port: int

    @property
    def url(self) -> str:
        """The server's URL."""

    def restart(self, mode: str) -> None:
        """Restart the server in *mode*."""


@dataclass
class Scenario:
    """One fault on one backend, with its workload and worker settings."""

    fault: str  # kill | restart | cut | drop | slow | clock | once | once_plain | caps | none
    backend: str  # postgres | redis
    groups: int = 20
    per_group: int = 15
    workers: int = 3
    concurrency: int = 3
    visibility: float = 2.0
    work_s: tuple[float, float] = (0.0, 0.004)
    slow_fraction: float = 0.0
    slow_s: float = 0.0
    extend: bool = True
    clock_offsets: tuple[float, ...] = (0.0,)
    #: the handlers' database effect (WorkerSpec.effect): "" none, "tx" in settle_in, "plain"
    effect: str = ""
    #: fairness caps: groups are dealt over keys ``k0``, ``k1``, ... with these
    #: ``max_in_flight``; the store is sampled every 10 ms and the handlers' spans checked
    caps: tuple[int, ...] = ()
    #: fraction of first attempts whose handler raises (nacked)
    fail_fraction: float = 0.0
    #: the workers take these in turn: Worker on the blocking transport, AsyncWorker on asyncio
    modes: tuple[str, ...] = ("sync", "async")
    #: how many faults to inject, and the pause between two (uniform in the range)
    faults: int = 0
    every_s: tuple[float, float] = (0.5, 1.0)
    timeout_s: float = 120.0

    @property
    def name(self) -> str:
        """Return ``backend/fault``."""
        return f"{self.backend}/{self.fault}"


@dataclass
class Outcome:
    """What one scenario did and what the checks found."""

    scenario: str
    events: int
    faults: int
    seconds: float
    verdict: Verdict
    notes: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """Return the scenario's numbers as one flat JSON-able dict."""
        v = self.verdict
        return {
            "scenario": self.scenario,
            "events": self.events,
            "faults": self.faults,
            "lost": v.lost,
            "duplicates": v.duplicates,
            "violations": len(v.violations),
            "redeliveries": v.redeliveries,
            "fenced_acks": v.fenced_acks,
            "unfinished_handlers": v.unfinished_handlers,
            "claims_lost_in_flight": v.claims_lost_in_flight,
            "leases_overrun": v.leases_overrun,
            "transport_errors": v.transport_errors,
            "seconds": round(self.seconds, 1),
            "notes": self.notes,
            "violation_samples": v.violations[:10],
        }


class _Workers:
    """The worker processes of one scenario; each has its own record file and log."""

    def __init__(self, scenario: Scenario, url: str, queue: str, folder: Path) -> None:
        self._scenario = scenario
        self._url = url
        self._queue = queue
        self._folder = folder
        self._names = itertools.count()
        self.alive: dict[str, subprocess.Popen[bytes]] = {}
        self.dead: list[subprocess.Popen[bytes]] = []
        #: per worker: bytes of its record file read so far, handlers entered minus exited
        self._read: dict[str, int] = {}
        self._open: dict[str, int] = {}
        #: the table of the handlers' effect rows (Scenario.effect)
        self.effect_table = ""

    def spawn(self) -> str:
        """Start one more worker process and return its name."""
        index = next(self._names)
        s = self._scenario
        name = f"w{index}"
        offsets = s.clock_offsets
        spec = WorkerSpec(
            url=self._url,
            queue=self._queue,
            name=name,
            record_path=str(self._folder / f"{name}.jsonl"),
            visibility=s.visibility,
            concurrency=s.concurrency,
            work_s=s.work_s,
            slow_fraction=s.slow_fraction,
            slow_s=s.slow_s,
            effect=s.effect,
            effect_table=self.effect_table,
            fail_fraction=s.fail_fraction,
            extend=s.extend,
            clock_offset_s=offsets[index % len(offsets)],
            # the clock jumps while the worker runs, at a different moment in each process
            clock_jump_after_s=random.Random(index).uniform(0.5, 3.0),
            mode=s.modes[index % len(s.modes)],
            seed=index,
        )
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
        with open(self._folder / f"{name}.log", "ab") as log:
            self.alive[name] = subprocess.Popen(
                [sys.executable, "-m", "pgque_chaos.worker", spec.to_json()],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return name

    def open_handlers(self, name: str) -> int:
        """Return how many handlers of worker *name* are running, by its records so far."""
        path = self._folder / f"{name}.jsonl"
        with contextlib.suppress(FileNotFoundError), open(path, "rb") as records:
            records.seek(self._read.get(name, 0))
            chunk = records.read()
            done = chunk.rfind(b"\n") + 1  # a line being written is read next time
            chunk = chunk[:done]
            self._read[name] = self._read.get(name, 0) + done
            entered, exited = chunk.count(b'"k":"enter"'), chunk.count(b'"k":"exit"')
            self._open[name] = self._open.get(name, 0) + entered - exited
        return self._open.get(name, 0)

    def kill_mid_handler(self, rng: random.Random) -> int:
        """SIGKILL one live worker that is running a handler; return how many it was running.

        Returns 0 (and kills nobody) when no worker is inside a handler right now.
        """
        busy = [name for name in sorted(self.alive) if self.open_handlers(name) > 0]
        if not busy:
            return 0
        name = rng.choice(busy)
        process = self.alive.pop(name)
        process.kill()
        process.wait()
        self.dead.append(process)
        return max(self.open_handlers(name), 1)

    def terminate_one(self, rng: random.Random) -> int:
        """SIGTERM one live worker (a deploy: it releases what it holds and stops), wait for
        it, and start a replacement; return 1, or 0 when no worker runs."""
        if not self.alive:
            return 0
        name = rng.choice(sorted(self.alive))
        process = self.alive.pop(name)
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        self.dead.append(process)
        self.spawn()
        return 1

    def reap(self) -> list[str]:
        """Replace every worker that died by itself; return their names with the exit codes.

        A worker must survive every fault of the scenarios: one that exits on its own is a
        failure to report (its log says why), and its replacement keeps the run going.
        """
        crashed = []
        for name, process in list(self.alive.items()):
            code = process.poll()
            if code is not None:
                del self.alive[name]
                self.dead.append(process)
                crashed.append(f"{name} (exit {code}, log {self._folder / name}.log)")
                self.spawn()
        return crashed

    def stop(self, grace: float = 30.0) -> list[int | None]:
        """SIGTERM every worker, wait up to *grace*, then SIGKILL; return the exit codes."""
        for process in self.alive.values():
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        codes: list[int | None] = []
        for process in self.alive.values():
            try:
                codes.append(process.wait(timeout=max(deadline - time.monotonic(), 0.1)))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                codes.append(None)
        self.alive.clear()
        return codes


def _publish(url: str, queue: str, s: Scenario) -> dict[int, tuple[str, int]]:
    """Publish the workload, one message of each group per round; return id -> (group, seq)."""
    groups = [f"g{n:04d}" for n in range(s.groups)]
    published: dict[int, tuple[str, int]] = {}
    keyed = group_caps(s)
    with connect(url, queue=queue) as transport:
        for name, cap in sorted(set(keyed.values())):
            assert isinstance(transport, SupportsFairness)
            transport.set_key_policy(name, max_in_flight=cap)
        for seq in range(s.per_group):
            by_key: dict[str | None, list[str]] = {}
            for g in groups:
                by_key.setdefault(keyed[g][0] if keyed else None, []).append(g)
            for key, members in by_key.items():
                items = [(g, Event(kind="chaos", data={"seq": seq})) for g in members]
                ids = transport.publish_many(items, fairness_key=key)
                published.update(zip(ids, ((g, seq) for g in members), strict=True))
    return published


def group_caps(s: Scenario) -> dict[str, tuple[str, int]]:
    """Each group's fairness key and its cap (Scenario.caps; empty without caps)."""
    if not s.caps:
        return {}
    return {f"g{n:04d}": (f"k{n % len(s.caps)}", s.caps[n % len(s.caps)]) for n in range(s.groups)}


class _CapSampler:
    """Read every key's in-flight count from the store every 10 ms, on a thread of its own
    with its own connection, and keep the highest seen per key (Scenario.caps)."""

    def __init__(self, url: str, queue: str) -> None:
        self._url = url
        self._queue = queue
        self.highest: dict[str, int] = {}
        self.samples = 0
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cap-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with connect(self._url, queue=self._queue) as transport:
            assert isinstance(transport, SupportsFairness)
            while not self._stop.wait(0.01):
                try:
                    keys = transport.keys()
                except PgqueError:  # a cut or a restart: sample again next time
                    self.failed += 1
                    continue
                self.samples += 1
                for info in keys:
                    self.highest[info.key] = max(self.highest.get(info.key, 0), info.in_flight)

    def stop(self) -> None:
        """Stop sampling and wait for the thread."""
        self._stop.set()
        self._thread.join(timeout=30)


def _retrying(call: Callable[[], Any], deadline: float) -> Any:
    """Call until it does not fail on a connection (the harness's own calls meet faults too)."""
    while True:
        try:
            return call()
        except PgqueError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class _Cutter:
    """Cut one worker connection from the server side: pg_terminate_backend / CLIENT KILL."""

    def __init__(self, backend: str, url: str, rng: random.Random) -> None:
        self._backend = backend
        self._url = url
        self._rng = rng
        self._client: Any
        if backend == "postgres":
            import psycopg

            self._client = psycopg.connect(url, autocommit=True)
        else:
            import redis

            self._client = redis.Redis.from_url(url)

    def cut(self) -> int:
        """Cut one random worker connection; return how many were cut (0 or 1)."""
        if self._backend == "postgres":
            if self._client.closed:  # a server restart broke it: connect again
                import psycopg

                self._client = psycopg.connect(self._url, autocommit=True, connect_timeout=2)
            row = self._client.execute(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM ("
                " SELECT pid FROM pg_stat_activity WHERE application_name = %s"
                " ORDER BY random() LIMIT 1) AS victim",
                (WORKER_APP,),
            ).fetchone()
            return int(row[0]) if row else 0
        me = self._client.client_id()
        ids = [c["id"] for c in self._client.client_list() if int(c["id"]) != me]
        if not ids:
            return 0
        return int(self._client.execute_command("CLIENT", "KILL", "ID", self._rng.choice(ids)))

    def close(self) -> None:
        """Close the cutter's own connection."""
        with contextlib.suppress(Exception):
            self._client.close()


def _records(folder: Path) -> Iterator[dict[str, Any]]:
    for path in sorted(folder.glob("*.jsonl")):
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                # A SIGKILL can cut the last line of a file short: it recorded nothing.
                with contextlib.suppress(json.JSONDecodeError):
                    yield json.loads(line)


def run_scenario(s: Scenario, server: Server, folder: Path, seed: int = 0) -> Outcome:
    """Run *s* against *server*, recording into *folder*; return its outcome. Never skips."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    queue = f"chaos_{s.fault}_{uuid.uuid4().hex[:8]}"
    url = server.url
    proxy = ReplyDropper(server.port) if s.fault == "drop" else None
    worker_url = url
    if proxy is not None:
        worker_url = url.replace(f":{server.port}/", f":{proxy.port}/")
    if s.backend == "postgres":
        worker_url += f"?application_name={WORKER_APP}"
    published = _publish(url, queue, s)
    sampler = _CapSampler(url, queue) if s.caps else None
    started = time.monotonic()
    deadline = started + s.timeout_s
    workers = _Workers(s, worker_url, queue, folder)
    if s.effect:
        workers.effect_table = _effect_table(url, queue)
    for _ in range(s.workers):
        workers.spawn()
    notes: dict[str, Any] = {}
    injected = 0
    cut_faults = ("cut", "once", "once_plain", "caps")
    cutter = _Cutter(s.backend, url, rng) if s.fault in cut_faults else None
    next_fault = time.monotonic() + rng.uniform(*s.every_s)
    kinds = ["fast", "immediate"] if s.backend == "postgres" else ["kill", "term"]
    modes = itertools.cycle([*kinds, "outage"])
    remaining = len(published)
    crashed: list[str] = []
    try:
        with connect(url, queue=queue) as watcher:
            while time.monotonic() < deadline:
                now = time.monotonic()
                if injected < s.faults and now >= next_fault and remaining:
                    done = _inject(s, server, workers, cutter, proxy, rng, modes, notes)
                    if done:  # else try again on the next round
                        injected += done
                        next_fault = time.monotonic() + rng.uniform(*s.every_s)
                crashed.extend(workers.reap())
                stats = _retrying(watcher.stats, deadline)
                remaining = stats.messages
                if not remaining:
                    break
                time.sleep(0.02 if s.fault == "cut" else 0.1)
            notes["exit_codes"] = workers.stop()
            final = _retrying(watcher.stats, time.monotonic() + 60)
    finally:
        workers.stop(grace=1)
        if sampler is not None:
            sampler.stop()
        if cutter is not None:
            cutter.close()
        if proxy is not None:
            proxy.close()
    seconds = time.monotonic() - started
    caps = group_caps(s)
    verdict = judge(
        _records(folder),
        published,
        remaining_messages=final.messages,
        dead_letters=final.dead_letters,
        group_caps=caps,
    )
    if sampler is not None:
        _judge_samples(sampler, caps, verdict, notes)
    if s.fault == "slow":
        injected = verdict.leases_overrun
    elif s.fault == "clock":
        # the workers whose clock was off by the jump when they stopped: the jump happened
        skews = [r["skew"] for r in _records(folder) if r["k"] == "stop"]
        injected = sum(abs(skew) > 60 for skew in skews)
        notes["jumps_planned"] = _jumped(s)
    if proxy is not None:
        notes["armed"] = injected
        injected = proxy.dropped
    if s.effect:
        _judge_effects(url, workers.effect_table, published, s.effect, verdict, notes)
    notes["records"] = str(folder)
    verdict.violations += [f"worker {crash} died by itself" for crash in crashed]
    if s.fault == "slow" and injected and not (verdict.redeliveries and verdict.fenced_acks):
        # handlers overran their leases: someone must have taken over, and a late ack failed
        verdict.violations.append("overrun leases were neither redelivered nor fenced")
    if not injected and s.faults:
        # a fault scenario that injected nothing proved nothing: fail it
        verdict.violations.append(f"no {s.fault} fault was injected before the queue drained")
    return Outcome(s.name, len(published), injected, seconds, verdict, notes)


def _judge_samples(
    sampler: _CapSampler,
    caps: dict[str, tuple[str, int]],
    verdict: Verdict,
    notes: dict[str, Any],
) -> None:
    """No key was ever seen by the store above its cap; the samples must have been taken."""
    limits = dict(caps.values())
    notes["cap_samples"] = sampler.samples
    notes["cap_samples_failed"] = sampler.failed
    notes["highest_in_flight"] = {key: sampler.highest.get(key, 0) for key in sorted(limits)}
    for key, cap in sorted(limits.items()):
        seen = sampler.highest.get(key, 0)
        if seen > cap:
            verdict.violations.append(f"key {key}: the store showed {seen} in flight, cap {cap}")
    if sampler.samples < 10:
        verdict.violations.append(f"the store was sampled {sampler.samples} times only")


def _effect_table(url: str, queue: str) -> str:
    """Create the table the handlers' effect rows go to (no key: a row written twice shows)."""
    import psycopg
    from psycopg import sql

    name = f"{queue}_effects"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE {} (message_id bigint NOT NULL, worker text)").format(
                sql.Identifier(name)
            )
        )
    return name


def _judge_effects(
    url: str,
    table: str,
    published: dict[int, tuple[str, int]],
    effect: str,
    verdict: Verdict,
    notes: dict[str, Any],
) -> None:
    """Count the effect rows per message: none missing; with ``tx`` none doubled either (the
    rows of ``plain`` written twice are counted, not judged: what settle_in prevents)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        counts: dict[int, int] = dict(
            conn.execute(
                sql.SQL("SELECT message_id, count(*) FROM {} GROUP BY 1").format(
                    sql.Identifier(table)
                )
            ).fetchall()
        )
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(table)))
    missing = [mid for mid in published if counts.get(mid, 0) == 0]
    doubled = {mid: n for mid, n in counts.items() if n > 1}
    notes["effect_rows"] = sum(counts.values())
    notes["effects_missing"] = len(missing)
    notes["effects_doubled"] = len(doubled)
    notes["effect_rows_extra"] = sum(n - 1 for n in doubled.values())
    if missing:
        verdict.violations.append(f"{len(missing)} messages have no effect row (e.g. {missing[0]})")
    if effect == "tx" and doubled:
        mid, n = next(iter(doubled.items()))
        verdict.violations.append(
            f"{len(doubled)} messages have more than one effect row in settle_in "
            f"(message {mid}: {n})"
        )


def _jumped(s: Scenario) -> int:
    """Return how many worker processes ran with a jumped clock."""
    offsets = s.clock_offsets
    return sum(1 for i in range(s.workers) if offsets[i % len(offsets)])


#: The scenarios whose faults take turns, and the turns: a kill -9 mid-handler, a connection
#: cut from the server side, then a server restart (once) or a worker's SIGTERM, a deploy's
#: stop in which it releases what it holds (caps). Nacks and expiries come from the handlers.
_TAKING_TURNS = {
    "caps": ("kill", "cut", "term"),
    "once": ("kill", "cut", "restart"),
    "once_plain": ("kill", "cut", "restart"),
}


def _in_turn(
    fault: str,
    server: Server,
    workers: _Workers,
    cutter: _Cutter | None,
    rng: random.Random,
    modes: Iterator[str],
    notes: dict[str, Any],
) -> int:
    """Inject the next fault of *fault*'s turns; count it by kind in ``notes[fault_faults]``;
    return how many were injected (0: try again on the next round)."""
    counted = notes.setdefault(f"{fault}_faults", {})
    turns = _TAKING_TURNS[fault]
    kind = turns[sum(counted.values()) % len(turns)]
    done = 0
    if kind == "kill":
        done = 1 if workers.kill_mid_handler(rng) else 0
        if done:
            workers.spawn()
    elif kind == "cut" and cutter is not None:
        try:
            done = cutter.cut()
        except Exception:  # the cutter's own connection may fail: try again later
            done = 0
    elif kind == "term":
        done = workers.terminate_one(rng)
    elif kind == "restart":
        server.restart(next(modes))
        done = 1
    if done:
        counted[kind] = counted.get(kind, 0) + 1
    return done


def _inject(
    s: Scenario,
    server: Server,
    workers: _Workers,
    cutter: _Cutter | None,
    proxy: ReplyDropper | None,
    rng: random.Random,
    modes: Iterator[str],
    notes: dict[str, Any],
) -> int:
    """Inject one fault of the scenario's kind; return how many were injected."""
    if s.fault in _TAKING_TURNS:
        return _in_turn(s.fault, server, workers, cutter, rng, modes, notes)
    if s.fault == "kill":
        running = workers.kill_mid_handler(rng)
        if not running:
            return 0
        notes["handlers_killed"] = notes.get("handlers_killed", 0) + running
        workers.spawn()  # a restarted worker joins the survivors
        return 1
    if s.fault == "restart":
        mode = next(modes)
        server.restart(mode)
        notes.setdefault("restart_modes", []).append(mode)
        return 1
    if s.fault == "drop" and proxy is not None:
        return int(proxy.arm(rng))
    if s.fault == "cut" and cutter is not None:
        try:
            return cutter.cut()
        except Exception as exc:  # the cutter's own connection may fail: note it, go on
            notes["cutter_errors"] = notes.get("cutter_errors", 0) + 1
            notes["cutter_last_error"] = type(exc).__name__
            return 0
    return 0


def as_json(outcomes: list[Outcome], command: str) -> dict[str, Any]:
    """Return the report of a run as JSON-able data."""
    return {
        "command": command,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "ok": all(o.verdict.ok for o in outcomes),
        "scenarios": [o.row() for o in outcomes],
    }


def scenario_dict(s: Scenario) -> dict[str, Any]:
    """Return the scenario's settings as JSON-able data."""
    return asdict(s)
