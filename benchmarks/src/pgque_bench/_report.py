"""Turn one run's results into JSON, a markdown report with ratios, and PNG charts.

The pure parts (:func:`target_rows`, :func:`targets_markdown`, :func:`spread_text`) take plain
numbers, so the harness's own tests check them without a server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Results = dict[str, Any]


@dataclass(frozen=True)
class Target:
    """One goal of the run: a ratio of two cases' medians (or one case's value) and a bound."""

    number: int
    name: str
    numerator: str
    denominator: str | None
    op: str  # ">=" or "<="
    goal: float
    unit: str = "x"


#: The targets, each judged on the medians of interleaved rounds of one run.
TARGETS: tuple[Target, ...] = (
    Target(1, "AsyncWorker(concurrency=8), async no-op / PgQueuer, one QueueManager at its "
           "defaults (asyncpg)", "worker-async-8", "pgqueuer-asyncpg-defaults", ">=", 1.5),
    Target(2, "Worker(concurrency=8), threads, sync no-op / the same PgQueuer",
           "worker-sync-8", "pgqueuer-asyncpg-defaults", ">=", 0.8),
    Target(3, "claim_many(32) + settle, 4 tasks on one AsyncPostgresTransport / PgQueuer best "
           "layout (4 QueueManagers x batch 10, asyncpg)", "pg-async-batch",
           "pgqueuer-asyncpg-best", ">=", 1.5),
    Target(4, "fused unbatched loop (settle_and_claim([previous], 1)), 4 processes, "
           "PostgresTransport / pgbench settle_claim.sql, 4 clients", "pg-fused-1",
           "pgbench-settle-claim", ">=", 0.8),
    Target(5, "publish_many in batches of 1,000 (postgres-async) / PgQueuer enqueue, lists of "
           "1,000 (asyncpg)", "publish-pg-async-batch", "publish-pgqueuer-asyncpg", ">=", 1.0),
    Target(6, "PostgreSQL / Redis, both claim_many(32) + settle, 4 tasks, async transports",
           "pg-async-batch", "redis-async-batch", ">=", 0.5),
    Target(7, "publish -> claim p99 at 50% load, PostgreSQL", "latency-postgres-load:p99_ms",
           None, "<=", 50.0, "ms"),
    Target(8, "Worker(concurrency=8) / procrastinate worker, concurrency 8, lock= per group, "
           "at its best (fetch polling 0.05 s)", "users-sync-8", "users-procrastinate-8-poll",
           ">=", 5.0),
    *(
        target
        for n, system in ((9, "postgres"), (15, "redis"))
        for target in (
            Target(n, f"noisy neighbour, {system}: small tenants' publish -> start p99 with "
                   "fairness keys / on an idle queue", f"tenants-noisy-{system}-keys:p99_ms",
                   f"tenants-noisy-{system}-idle:p99_ms", "<=", 3.0),
            Target(n + 1, f"key splitting, {system}: tenant A (10x the groups) off its share, "
                   "worst key", f"tenants-split-{system}:max_deviation_pct", None, "<=", 5.0,
                   "%"),
            Target(n + 2, f"weights 1-4, {system}: each key's share of the claims off its "
                   "weight's, worst key", f"tenants-weights-{system}:max_deviation_pct", None,
                   "<=", 5.0, "%"),
            Target(n + 3, f"rates, {system}: each limited key's steady rate off its limit, "
                   "worst key", f"tenants-rates-{system}:max_deviation_pct", None, "<=", 5.0,
                   "%"),
            Target(n + 4, f"rates, {system}: claims of any window beyond its burst plus what "
                   "the window earns, worst key", f"tenants-rates-{system}:max_excess", None,
                   "<=", 1.0, "claims"),
            Target(n + 5, f"cost, {system}: claim_many(32) + ack_many with keys / without "
                   "(medians of interleaved rounds)", f"tenants-cost-{system}:ratio", None, ">=",
                   0.67),
        )
    ),
    Target(21, "AsyncApp task worker / the raw AsyncWorker, both concurrency 8 on the same "
           "backlog, PostgreSQL", "worker-tasks-async-8", "worker-async-8", ">=", 0.95),
    Target(22, "task defer_many / publish_many of the same messages, each Event built, lists "
           "of 1,000, postgres-async", "publish-pg-async-defer", "publish-pg-async-events",
           ">=", 0.95),
    Target(23, "AsyncWorker(concurrency=8) with job history on (history=7d) / the same worker "
           "with history off, the same backlog, PostgreSQL", "worker-async-8-history",
           "worker-async-8", ">=", 0.85),
    Target(24, "history: claim_many(32) + ack_many while a past day of history is pruned / "
           "the same claims outside the prunes, PostgreSQL", "history-prune-postgres:ratio",
           None, ">=", 0.9),
    *(
        Target(n, f"AsyncWorker(concurrency={slots}), no-op / the best peer at {slots} slots "
               "(PgQueuer, procrastinate at its best)", f"slots-pgque-{slots}",
               f"slots-pgque-{slots}:best_peer", ">=", 1.0)
        for n, slots in ((25, 1), (26, 4), (27, 16), (28, 64))
    ),
    Target(29, "AsyncWorker(concurrency=200), handlers await 10 ms / PgQueuer, the same "
           "handler and concurrency", "io-pgque-200", "io-pgqueuer-200", ">=", 1.2),
    Target(30, "AsyncWorker(concurrency=200), handlers await 10 ms / the lesser of its no-op "
           "rate and 20,000/s", "io-pgque-200", "io-pgque-200:ceiling", ">=", 0.8),
    Target(31, "publish -> claim p99 at 90% load, PostgreSQL", "latency-postgres-load90:p99_ms",
           None, "<=", 100.0, "ms"),
    Target(32, "AsyncWorker(concurrency=8) with job history on (history=7d) / the same worker "
           "with history off, the same backlog, Redis", "worker-redis-async-8-history",
           "worker-redis-async-8", ">=", 0.85),
    Target(33, "stats() at 1,000,000 groups (100,000 leased, 1,000 parked, 1,000 paused), "
           "Redis: median of 200 calls", "stats-redis:median_ms", None, "<=", 5.0, "ms"),
    Target(34, "dashboard at 1,000,000 groups and 10,000,000 history records: the slowest "
           "page's median answer (overview, groups, a group, workers, history, a message's "
           "story, history by group, by kind, by a rare kind and of the dead letters), "
           "PostgreSQL", "dashboard-postgres:slowest_ms", None, "<=", 100.0, "ms"),
)  # fmt: skip

#: What the I/O-bound case is judged against at most (messages/s): 200 slots each waiting
#: 10 ms can start no more than this.
IO_CEILING = 20_000.0

#: The fields of a tenants case that targets read (``id:field``).
TENANT_FIELDS = ("p99_ms", "max_deviation_pct", "max_excess", "ratio", "slowest_ms")


def fmt(value: float | None, digits: int = 0) -> str:
    """Return *value* with thousands separators, or "-" when there is none."""
    return "-" if value is None else f"{value:,.{digits}f}"


def ratio_text(value: float | None) -> str:
    """Return a ratio as ``1.23x``, or "-"."""
    return "-" if value is None else f"{value:.2f}x"


def spread_text(summary: Mapping[str, Any], digits: int = 0) -> str:
    """Return ``min-max (spread%)`` of a case's rounds, or "-" without any."""
    if not summary.get("rounds"):
        return "-"
    low, high, spread = summary["min"], summary["max"], summary.get("spread")
    pct = "" if spread is None else f" ({spread * 100:.0f}%)"
    return f"{fmt(low, digits)}-{fmt(high, digits)}{pct}"


def target_rows(
    values: Mapping[str, float | None], errors: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Return each target with its measured value and whether it was met.

    *values* maps a case id (or ``id:field`` for a single value such as a p99) to its median;
    *errors* maps a case id to its error. A target whose case failed shows that error and
    ``met`` None; one whose case did not run shows "-" and ``met`` None.
    """
    out: list[dict[str, Any]] = []
    for target in TARGETS:
        needed = [target.numerator] + ([target.denominator] if target.denominator else [])
        failed = [f"{key.split(':')[0]}: {errors[key.split(':')[0]]}" for key in needed
                  if key.split(":")[0] in errors]  # fmt: skip
        top = values.get(target.numerator)
        value: float | None
        if target.denominator is None:
            value = top
        else:
            bottom = values.get(target.denominator)
            value = None if top is None or not bottom else top / bottom
        met = None
        if value is not None and not failed:
            met = value >= target.goal if target.op == ">=" else value <= target.goal
        if failed:
            measured = "error: " + "; ".join(failed)
        elif value is None:
            measured = "-"
        elif target.unit == "x":
            measured = ratio_text(value)
        else:
            measured = f"{value:.1f} {target.unit}"
        goal = f"{target.op} {target.goal:g}{'x' if target.unit == 'x' else ' ' + target.unit}"
        out.append(
            {
                "n": target.number,
                "target": target.name,
                "numerator": target.numerator,
                "denominator": target.denominator,
                "measured": measured,
                "value": None if failed else value,
                "goal": goal,
                "met": met,
            }
        )
    return out


def targets_markdown(rows: list[dict[str, Any]]) -> str:
    """Return the targets as a markdown table: number, target, measured, goal, met."""
    lines = ["| # | target | measured | goal | met |", "|---|---|---|---|---|"]
    for row in rows:
        met = "-" if row["met"] is None else ("yes" if row["met"] else "**no**")
        measured = str(row["measured"]).replace("|", "/")
        lines.append(f"| {row['n']} | {row['target']} | {measured} | {row['goal']} | {met} |")
    return "\n".join(lines)


def _cases(results: Results) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in results.get("cases", [])}


def medians(results: Results) -> dict[str, float | None]:
    """Return every case's median (and the single-run latency fields as ``id:field``)."""
    out: dict[str, float | None] = {}
    for case_id, row in _cases(results).items():
        out[case_id] = row["summary"]["median"]
        if row["section"] == "latency" and not row.get("error"):
            for key in ("p50_ms", "p99_ms"):
                out[f"{case_id}:{key}"] = row["last"].get(key)
        if row["section"] in ("tenants", "history", "dashboard") and not row.get("error"):
            for key in TENANT_FIELDS:
                out[f"{case_id}:{key}"] = row["last"].get(key)
        if row["section"] == "stats" and not row.get("error"):
            out[f"{case_id}:median_ms"] = row["last"].get("median_ms")
    for case_id in list(out):
        if case_id.startswith("slots-pgque-"):
            # The best peer at the same slots: the higher of the peers' medians.
            slots = case_id.removeprefix("slots-pgque-")
            peers = [out.get(f"slots-{peer}-{slots}") for peer in ("pgqueuer", "procrastinate")]
            measured = [value for value in peers if value is not None]
            out[f"{case_id}:best_peer"] = max(measured) if measured else None
        if case_id.startswith("io-pgque-") and not case_id.endswith("-noop"):
            noop = out.get(f"{case_id}-noop")
            out[f"{case_id}:ceiling"] = None if noop is None else min(noop, IO_CEILING)
    return out


def targets(results: Results) -> list[dict[str, Any]]:
    """Return the targets of *results* (see :func:`target_rows`)."""
    errors = {k: str(v["error"]) for k, v in _cases(results).items() if v.get("error")}
    return target_rows(medians(results), errors)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def _rounded_table(
    results: Results, section: str, refs: list[tuple[str, str]], unit: str = "msg/s"
) -> list[str]:
    cases = [row for row in results.get("cases", []) if row["section"] == section]
    if not cases:
        return []
    meds = medians(results)
    head = f"| case | median {unit} | spread: min-max (range/median) | rounds |"
    head += "".join(f" x {title} |" for _ref, title in refs)
    lines = [head, "|" + "---|" * (4 + len(refs))]
    digits = 2 if unit == "s" else 0
    for row in cases:
        summary = row["summary"]
        if row.get("error"):
            lines.append(
                f"| {row['label']} | error: {row['error']} | | {len(row['values'])} |"
                + " |" * len(refs)
            )
            continue
        note = f" [{row['last']['settle']}]" if row["last"].get("settle") else ""
        cells = [ratio_text(_ratio(summary["median"], meds.get(ref))) for ref, _t in refs]
        lines.append(
            f"| {row['label']}{note} | {fmt(summary['median'], digits)} | "
            f"{spread_text(summary, digits)} | {summary['rounds']} |"
            + "".join(f" {cell} |" for cell in cells)
        )
    return [*lines, ""]


def _once(results: Results, section: str) -> list[dict[str, Any]]:
    return [row for row in results.get("cases", []) if row["section"] == section]


def _history_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The history section: claims while past days of job history are pruned, and beside."""
    if not rows:
        return []
    lines = ["### Job history: pruning beside claims (one run)", ""]
    for row in rows:
        last = row.get("last", {})
        if row.get("error"):
            lines.append(f"- {row['label']}: error: {row['error']}")
            continue
        lines.append(
            f"- {row['label']}: {last['days']} days of {last['rows_per_day']:,} records pruned "
            f"one at a time (each prune {', '.join(f'{ms:g}' for ms in last['prune_ms'])} ms); "
            f"{fmt(last['during_per_s'])} claims/s in the {last['during_batches']:,} batches "
            f"that overlapped a prune, {fmt(last['outside_per_s'])} outside: "
            f"{ratio_text(last['ratio'])}"
        )
    return [*lines, ""]


def _stats_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The stats section: stats() timed on a big queue."""
    if not rows:
        return []
    lines = ["### stats() on a big queue (one run)", ""]
    for row in rows:
        last = row.get("last", {})
        if row.get("error"):
            lines.append(f"- {row['label']}: error: {row['error']}")
            continue
        lines.append(
            f"- {row['label']} ({last['leased']:,} leased, {last['parked']:,} of them parked, "
            f"{last['paused']:,} paused): median {last['median_ms']:.2f} ms, p90 "
            f"{last['p90_ms']:.2f} ms, min {last['min_ms']:.2f} ms, max {last['max_ms']:.2f} ms "
            f"over {last['calls']:,} calls"
        )
    return [*lines, ""]


def _dashboard_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The dashboard section: each page's median answer time over a big queue."""
    if not rows:
        return []
    lines = ["### Dashboard pages over a big queue (one run)", ""]
    for row in rows:
        last = row.get("last", {})
        if row.get("error"):
            lines += [f"- {row['label']}: error: {row['error']}", ""]
            continue
        lines += [
            f"{row['label']}: {last['requests']} requests per page after {last['warmup']} "
            "(interleaved, one kept-alive connection); milliseconds",
            "",
            "| page | path | median | lowest | highest |",
            "|---|---|---|---|---|",
        ]
        for page, r in last["pages"].items():
            lines.append(
                f"| {page} | `{r['path']}` | {fmt(r['median_ms'], 1)} | {fmt(r['low_ms'], 1)} | "
                f"{fmt(r['high_ms'], 1)} |"
            )
        lines.append("")
    return lines


def _tenants_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The tenants section: one line per case, each with the numbers its scenario gives."""
    if not rows:
        return []
    lines = [
        "### Fair shares between tenants (fairness keys; one run)",
        "",
        "| case | result |",
        "|---|---|",
    ]
    for row in rows:
        last = row.get("last", {})
        if row.get("error"):
            text = f"error: {row['error']}"
        elif "unsupported" in last:
            text = f"not offered ({last['unsupported']})"
        elif row["kind"] == "tenants_shares":
            shares = ", ".join(
                f"{key} {cell['share']:.1%} (weight share {cell['expected']:.1%}, "
                f"{cell['groups']:,} groups)"
                for key, cell in last["keys"].items()
            )
            text = f"{last['claims']:,} claims: {shares}; worst {last['max_deviation_pct']:.1f}%"
        elif row["kind"] == "tenants_noisy":
            bound = "at least " if last.get("unstarted") else ""
            text = (
                f"small tenants' publish -> start: {bound}p50 {fmt(last['p50_ms'], 1)} ms, p99 "
                f"{fmt(last['p99_ms'], 1)} ms, max {fmt(last['max_ms'], 1)} ms "
                f"({last['small_messages']:,} messages; big tenant: {last['big_handled']:,} "
                "handled meanwhile)"
            )
            if last.get("unstarted"):
                text += f"; {last['unstarted']:,} not started when it stopped, counted so far"
        elif row["kind"] == "tenants_rates":
            text = (
                "; ".join(
                    f"{key}: {cell['steady_per_s']:.1f}/s for a limit of {cell['limit_per_s']:g}/s "
                    f"({cell['deviation_pct']:+.1f}%), worst window {cell['worst_window']:.1f} "
                    f"claims for a burst of {cell['burst']}"
                    for key, cell in last["keys"].items()
                )
                + f" ({last['seconds']:g} s)"
            )
        else:
            text = (
                f"{last['keys']:,} keys, {last['groups']:,} groups: "
                f"{fmt(last['keys_per_s'])} claims/s with keys, {fmt(last['nokeys_per_s'])} "
                f"without: {ratio_text(last['ratio'])}"
            )
        lines.append(f"| {row['label']} | {text.replace('|', '/')} |")
    lines.append("")
    return lines


def markdown(results: Results, charts: dict[str, str]) -> str:
    """Return the markdown report: targets, then every scenario's table, with ratios."""
    meta = results["meta"]
    sizes = meta["sizes"]
    rounds = meta["rounds"]
    lines = [
        f"Run: `{meta['command']}` — {meta['started']} UTC, {meta['seconds']:.0f} s, "
        f"{'quick' if sizes['quick'] else 'full'} sizes, {rounds} interleaved rounds.",
        "",
        f"Machine: {meta['machine']}.",
        "",
        "### Targets (medians of the interleaved rounds of this run)",
        "",
        targets_markdown(results.get("targets", [])),
        "",
        "### What is timed",
        "",
        f"Every drain case drains the same backlog: {sizes['drain_messages']:,} "
        f"messages, {sizes['drain_groups']:,} groups x {sizes['per_group']} (PgQueuer's jobs "
        "are ungrouped: it has no per-key order; procrastinate's carry `lock=<group>`). Each "
        "case runs in a process of its own; round *r* runs a section's cases in the plan order "
        "rotated by *r*. Handlers are no-ops. pgque's transport loops and pgbench start the "
        "clock when every consumer is connected; the worker cases (pgque's Worker and "
        "AsyncWorker, PgQueuer's QueueManagers, procrastinate's worker) open their "
        "connections or pool first and start the clock when the worker's run call is made, so "
        "the worker's own start-up inside that call is timed for every system alike; the "
        "peers' start-to-stop time on an empty queue is measured on its own (Start-up table). "
        "A case that does not settle every message is an error, not a number. pgbench runs "
        "90% of the backlog (each of its transactions must find work).",
        "",
    ]
    lines += ["### Drain (messages/s)", ""]
    lines += _rounded_table(
        results,
        "drain",
        [
            ("pgqueuer-asyncpg-defaults", "PgQueuer defaults (asyncpg)"),
            ("pgqueuer-asyncpg-best", "PgQueuer best (asyncpg)"),
            ("pgbench-claim-ack", "pgbench claim_ack"),
        ],
    )
    if _once(results, "startup"):
        lines += ["### Start-up: the peers' worker from start to return on an empty queue", ""]
        lines += _rounded_table(results, "startup", [], unit="s")
    lines += ["### Workers: what a user runs (messages/s)", ""]
    worker_rows = _rounded_table(
        results,
        "workers",
        [
            ("users-pgqueuer-defaults", "PgQueuer defaults"),
            ("users-procrastinate-8-poll", "procr. 8 best"),
        ],
    )
    if worker_rows:
        lines += [
            f"A backlog of its own, the same for every case: {sizes['users_groups']:,} groups x "
            f"{sizes['users_per_group']} ({sizes['users_groups'] * sizes['users_per_group']:,} "
            "messages; smaller than the drain's because procrastinate's per-lock fetch runs at "
            "tens of jobs per second on this machine). PgQueuer has no concurrency setting "
            "(each fetched job runs as a task), so it appears at its defaults only; its jobs "
            "are ungrouped.",
            "",
            *worker_rows,
        ]
    slot_rows = _rounded_table(results, "slots", [])
    if slot_rows:
        lines += [
            "### Worker slots and I/O-bound handlers (messages/s)",
            "",
            f"No-op handlers at each number of slots, every system draining the same backlog "
            f"({sizes['slots_groups']:,} groups x {sizes['slots_per_group']}; PgQueuer's jobs "
            "ungrouped, procrastinate's with `lock=<group>`); then handlers that await "
            f"{sizes['io_sleep'] * 1000:g} ms at {sizes['io_slots']} slots "
            f"({sizes['io_groups']:,} groups x {sizes['io_per_group']}). pgque's pool holds a "
            f"connection per slot and a spare, at most {sizes['pool_cap']}.",
            "",
            *slot_rows,
        ]
    lines += ["### Publish (messages/s, one producer)", ""]
    lines += _rounded_table(results, "publish", [("publish-pgqueuer-asyncpg", "PgQueuer asyncpg")])
    latency = _once(results, "latency")
    if latency:
        lines += [
            "### Publish → claim latency (ms, one run; load = 50% or 90% of one consumer's "
            "measured capacity)",
            "",
            "| system | load | p50 | p99 | max | samples |",
            "|---|---|---|---|---|---|",
        ]
        for row in latency:
            if row.get("error"):
                lines.append(f"| {row['system']} | {row['mode']} | error: {row['error']} | | | |")
                continue
            last = row["last"]
            share = last.get("share") or 0.5
            load = "idle" if row["mode"] == "idle" else f"{last['rate']:,.0f}/s ({share:.0%})"
            lines.append(
                f"| {row['system']} | {load} | {fmt(last['p50_ms'], 1)} | "
                f"{fmt(last['p99_ms'], 1)} | {fmt(last['max_ms'], 1)} | {last['samples']} |"
            )
        lines.append("")
    fairness = _once(results, "fairness")
    if fairness:
        lines += [
            "### Fairness (one hot group beside cold groups of 5; one run)",
            "",
            "| system | hot messages | cold groups | claims until all cold served | hot claims |",
            "|---|---|---|---|---|",
        ]
        for row in fairness:
            if row.get("error"):
                lines.append(f"| {row['system']} | error: {row['error']} | | | |")
                continue
            last = row["last"]
            lines.append(
                f"| {row['system']} | {last['hot']:,} | {last['cold_groups']:,} | "
                f"{last['claims']:,} | {last['hot_claims']:,} |"
            )
        lines.append("")
    lines += _tenants_markdown(_once(results, "tenants"))
    lines += _history_markdown(_once(results, "history"))
    lines += _stats_markdown(_once(results, "stats"))
    lines += _dashboard_markdown(_once(results, "dashboard"))
    scale = _once(results, "scale")
    if scale:
        lines += [
            "### Claim cost by queue shape (PostgreSQL, one claim; one run)",
            "",
            "| queue | p50 ms | p99 ms | x smallest |",
            "|---|---|---|---|",
        ]
        ok = [row["last"] for row in scale if not row.get("error")]
        base = min((r["p50_ms"] for r in ok if r["depth"] == 1), default=None)
        for row in scale:
            if row.get("error"):
                lines.append(f"| {row['label']} | error: {row['error']} | | |")
                continue
            last = row["last"]
            lines.append(
                f"| {row['label']} | {fmt(last['p50_ms'], 2)} | {fmt(last['p99_ms'], 2)} | "
                f"{ratio_text(_ratio(last['p50_ms'], base))} |"
            )
        lines.append("")
    xmin = _once(results, "xmin")
    if xmin:
        lines += [
            f"### Held xmin (PostgreSQL, publish+claim+ack cycles, {sizes['xmin_workers']} "
            f"processes, {sizes['xmin_seconds']:.0f} s each; one run)",
            "",
            "| snapshot held | cycles/s | new dead rows: groups | messages | ratio |",
            "|---|---|---|---|---|",
        ]
        free = next((r["last"] for r in xmin if not r["held"] and not r.get("error")), None)
        for row in xmin:
            if row.get("error"):
                lines.append(f"| {row['held']} | error: {row['error']} | | | |")
                continue
            last = row["last"]
            dead = last["dead_tuples"]
            r = _ratio(last["rate"], None if free is None else free["rate"])
            lines.append(
                f"| {'yes' if row['held'] else 'no'} | {fmt(last['rate'])} | "
                f"{dead.get('groups', 0):,} | {dead.get('messages', 0):,} | {ratio_text(r)} |"
            )
        lines.append("")
    errors = [
        f"- {row['label']} ({row['id']}): {row['error']}"
        for row in results.get("cases", [])
        if row.get("error")
    ]
    if errors:
        lines += ["### Errors", "", *errors, ""]
    for title, path in charts.items():
        lines += [f"![{title}]({path})", ""]
    return "\n".join(lines)


def charts(results: Results, folder: Path, prefix: str) -> dict[str, str]:
    """Draw the drain/worker medians (with min-max bars) and the latency CDF; title -> file."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: dict[str, str] = {}
    rows = [
        row
        for row in results.get("cases", [])
        if row["section"] in ("drain", "workers") and row["summary"]["median"] is not None
    ]
    if rows:
        fig, ax = plt.subplots(figsize=(8, 0.35 * len(rows) + 1.2), dpi=80)
        meds = [row["summary"]["median"] for row in rows]
        lows = [m - row["summary"]["min"] for m, row in zip(meds, rows, strict=True)]
        highs = [row["summary"]["max"] - m for m, row in zip(meds, rows, strict=True)]
        ax.barh(range(len(rows)), meds, xerr=[lows, highs], color="tab:blue", alpha=0.8)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([row["label"][:60] for row in rows], fontsize=6)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("messages/s (median, bars: min-max of the rounds)")
        ax.set_title("Drain: the same backlog for every system")
        ax.grid(True, axis="x", alpha=0.3)
        fig.tight_layout()
        name = f"{prefix}throughput.png"
        fig.savefig(folder / name)
        plt.close(fig)
        out["Drain throughput, median and spread"] = name
    curves = [row for row in _once(results, "latency") if row.get("cdf_ms")]
    if curves:
        fig, ax = plt.subplots(figsize=(7, 4), dpi=80)
        for row in curves:
            values = row["cdf_ms"]
            ys = [(i + 1) / len(values) for i in range(len(values))]
            ax.plot(values, ys, label=f"{row['system']} ({row['mode']})")
        ax.set_xscale("log")
        ax.set_xlabel("publish → claim (ms)")
        ax.set_ylabel("fraction")
        ax.set_title("Latency CDF")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
        fig.tight_layout()
        name = f"{prefix}latency_cdf.png"
        fig.savefig(folder / name)
        plt.close(fig)
        out["Publish to claim latency CDF"] = name
    return out


def write(results: Results, folder: Path, prefix: str) -> tuple[Path, Path]:
    """Write ``<prefix>results.json``, ``<prefix>results.md`` and the charts into *folder*."""
    folder.mkdir(parents=True, exist_ok=True)
    drawn = charts(results, folder, prefix)
    json_path = folder / f"{prefix}results.json"
    json_path.write_text(json.dumps(results, indent=1, default=str) + "\n", encoding="utf-8")
    md_path = folder / f"{prefix}results.md"
    md_path.write_text(markdown(results, drawn) + "\n", encoding="utf-8")
    return json_path, md_path
