"""Turn one run's results into JSON, a markdown report with ratios, and PNG charts."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Results = dict[str, Any]


def _find(rows: Iterable[dict[str, Any]], **keys: object) -> dict[str, Any] | None:
    for row in rows:
        if all(row.get(k) == v for k, v in keys.items()) and "error" not in row:
            return row
    return None


def _rate(results: Results, system: str, workers: int, batch: int = 1) -> float | None:
    row = _find(results.get("drain", []), system=system, workers=workers, batch=batch)
    return None if row is None else float(row["rate"])


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def targets(results: Results) -> list[dict[str, Any]]:
    """Return each target of the issue with its measured value and whether it was met."""
    sizes = results["meta"]["sizes"]
    w = 8 if 8 in sizes["workers"] else max(sizes["workers"])
    b = sizes["batch"]
    pg1 = _rate(results, "postgres", w)
    pgb = _rate(results, "postgres", w, b)
    out: list[dict[str, Any]] = []

    def add(name: str, value: float | None, goal: str, ok: bool | None, unit: str = "x") -> None:
        shown = _x(value) if unit == "x" else ("-" if value is None else f"{value:.1f} {unit}")
        out.append({"target": name, "measured": shown, "goal": goal, "met": ok, "value": value})

    def ge(value: float | None, goal: float) -> bool | None:
        return None if value is None else value >= goal

    def le(value: float | None, goal: float) -> bool | None:
        return None if value is None else value <= goal

    r = _ratio(pg1, _rate(results, "pgbench", w))
    add(f"Postgres sync unbatched drain, {w} workers / pgbench limit", r, ">= 0.8x", ge(r, 0.8))
    r = _ratio(pgb, pg1)
    add(f"Postgres batched (batch {b}) / unbatched, {w} workers", r, ">= 5x", ge(r, 5))
    r = _ratio(pgb, _rate(results, "redis", w))
    add(f"Postgres batch {b} / Redis unbatched, {w} workers", r, ">= 1.0x", ge(r, 1.0))
    r = _ratio(pgb, _rate(results, "redis", w, b))
    add(f"Postgres / Redis, both batch {b}, {w} workers", r, ">= 0.5x", ge(r, 0.5))
    r = _ratio(pg1, _rate(results, "procrastinate", w))
    add(f"Postgres sync unbatched / procrastinate lock=group, {w} workers", r, ">= 5x", ge(r, 5))
    best = max((x for x in (pg1, pgb) if x is not None), default=None)
    r = _ratio(best, _rate(results, "pgqueuer", w))
    add(f"Postgres (grouped, best batch) / PgQueuer ungrouped, {w}", r, ">= 1.0x", ge(r, 1.0))
    idle = _find(results.get("latency", []), system="postgres", mode="idle")
    p50 = None if idle is None else idle["p50_ms"]
    p99 = None if idle is None else idle["p99_ms"]
    add("idle publish -> claim p50, Postgres with NOTIFY", p50, "<= 5 ms", le(p50, 5), "ms")
    add("idle publish -> claim p99, Postgres with NOTIFY", p99, "<= 20 ms", le(p99, 20), "ms")
    scale = [
        row for row in results.get("scale", []) if row.get("depth") == 1 and "error" not in row
    ]
    if len(scale) >= 2:
        low = min(scale, key=lambda row: row["groups"])
        high = max(scale, key=lambda row: row["groups"])
        r = _ratio(high["p50_ms"], low["p50_ms"])
        name = f"claim p50 at {high['groups']:,} groups / at {low['groups']:,}"
        add(name, r, "<= 1.5x", le(r, 1.5))
    fair = _find(results.get("fairness", []), system="postgres")
    claims = None if fair is None or fair["unserved"] else float(fair["claims"])
    add(
        "fairness: claims until every cold group served (Postgres)",
        claims,
        "<= 1,100",
        le(claims, 1100),
        "claims",
    )
    held = _find(results.get("xmin", []), held=True)
    free = _find(results.get("xmin", []), held=False)
    r = _ratio(None if held is None else held["rate"], None if free is None else free["rate"])
    add("throughput with xmin held / without", r, ">= 0.7x", ge(r, 0.7))
    return out


def markdown(results: Results, charts: dict[str, str]) -> str:
    """Return the markdown report: tables of every scenario and the targets, with ratios."""
    meta = results["meta"]
    sizes = meta["sizes"]
    lines = [
        f"Run: `{meta['command']}` — {meta['started']} UTC, {meta['seconds']:.0f} s, "
        f"{'quick' if sizes['quick'] else 'full'} sizes.",
        "",
    ]
    lines += [f"Machine: {meta['machine']}.", ""]
    workers = sizes["workers"]
    lines += ["### Drain (messages/s, no-op handler)", ""]
    lines.append(
        f"{sizes['drain_messages']:,} messages over {sizes['drain_groups']:,} groups "
        f"(peers: {sizes['peer_messages']:,}). Ratio columns at "
        f"{8 if 8 in workers else max(workers)} workers."
    )
    lines.append("")
    ref_w = 8 if 8 in workers else max(workers)
    head = "| system | batch | " + " | ".join(f"{n} w" for n in workers)
    head += " | x pgbench | x Redis (same batch) |"
    lines += [head, "|" + "---|" * (len(workers) + 4)]
    seen: list[tuple[str, int]] = []
    for row in results.get("drain", []):
        key = (row["system"], row["batch"])
        if key not in seen:
            seen.append(key)
    for system, batch in seen:
        cells = [_fmt(_rate(results, system, n, batch)) for n in workers]
        mine = _rate(results, system, ref_w, batch)
        vs_pgbench = _ratio(mine, _rate(results, "pgbench", ref_w, batch))
        vs_redis = _ratio(mine, _rate(results, "redis", ref_w, batch))
        lines.append(
            f"| {system} | {batch} | "
            + " | ".join(cells)
            + f" | {_x(vs_pgbench)} | {_x(vs_redis)} |"
        )
    lines.append("")
    if results.get("publish"):
        lines += [
            "### Publish (messages/s, one producer)",
            "",
            "| system | batch | rate | x pgbench |",
            "|---|---|---|---|",
        ]
        limit = _find(results["publish"], system="pgbench")
        for row in results["publish"]:
            if "error" in row:
                lines.append(f"| {row['system']} | {row['batch']} | error: {row['error']} | |")
                continue
            r = _ratio(row["rate"], None if limit is None else limit["rate"])
            lines.append(f"| {row['system']} | {row['batch']} | {_fmt(row['rate'])} | {_x(r)} |")
        lines.append("")
    if results.get("latency"):
        lines += [
            "### Publish → claim latency (ms)",
            "",
            "| system | load | p50 | p99 | max | samples |",
            "|---|---|---|---|---|---|",
        ]
        for row in results["latency"]:
            if "error" in row:
                lines.append(f"| {row['system']} | {row['mode']} | error: {row['error']} | | | |")
                continue
            load = "idle" if row["mode"] == "idle" else f"{row['rate']:,.0f}/s (50%)"
            lines.append(
                f"| {row['system']} | {load} | {_fmt(row['p50_ms'], 1)} | {_fmt(row['p99_ms'], 1)} "
                f"| {_fmt(row['max_ms'], 1)} | {row['samples']} |"
            )
        lines.append("")
    if results.get("fairness"):
        lines += [
            "### Fairness (one hot group beside cold groups of 5)",
            "",
            "| system | hot messages | cold groups | claims until all cold served | hot claims |",
            "|---|---|---|---|---|",
        ]
        for row in results["fairness"]:
            if "error" in row:
                lines.append(f"| {row['system']} | error: {row['error']} | | | |")
                continue
            lines.append(
                f"| {row['system']} | {sizes['fairness_hot']:,} | {row['cold_groups']:,} | "
                f"{row['claims']:,} | {row['hot_claims']:,} |"
            )
        lines.append("")
    if results.get("scale"):
        lines += [
            "### Claim cost by queue shape (Postgres, one claim)",
            "",
            "| groups | messages per group | p50 ms | p99 ms | x smallest |",
            "|---|---|---|---|---|",
        ]
        rows = [r for r in results["scale"] if "error" not in r]
        base = min((r["p50_ms"] for r in rows if r["depth"] == 1), default=None)
        for row in results["scale"]:
            if "error" in row:
                lines.append(f"| {row.get('label', '')} | error: {row['error']} | | | |")
                continue
            lines.append(
                f"| {row['groups']:,} | {row['depth']:,} | {_fmt(row['p50_ms'], 2)} | "
                f"{_fmt(row['p99_ms'], 2)} | {_x(_ratio(row['p50_ms'], base))} |"
            )
        lines.append("")
    if results.get("xmin"):
        lines += [
            "### Held xmin (Postgres, publish+claim+ack cycles, "
            f"{sizes['xmin_workers']} workers, {sizes['xmin_seconds']:.0f} s)",
            "",
            "| snapshot held | cycles/s | new dead rows: groups | messages | ratio |",
            "|---|---|---|---|---|",
        ]
        free = _find(results["xmin"], held=False)
        for row in results["xmin"]:
            if "error" in row:
                lines.append(f"| {row['held']} | error: {row['error']} | | | |")
                continue
            dead = row["dead_tuples"]
            r = _ratio(row["rate"], None if free is None else free["rate"])
            lines.append(
                f"| {'yes' if row['held'] else 'no'} | {_fmt(row['rate'])} | "
                f"{dead.get('groups', 0):,} | {dead.get('messages', 0):,} | {_x(r)} |"
            )
        lines.append("")
    lines += ["### Targets", "", "| target | measured | goal | met |", "|---|---|---|---|"]
    for t in targets(results):
        met = "-" if t["met"] is None else ("yes" if t["met"] else "**no**")
        lines.append(f"| {t['target']} | {t['measured']} | {t['goal']} | {met} |")
    lines.append("")
    errors = [
        f"- {section}: {row.get('system', '')} {row['error']}"
        for section in ("drain", "publish", "latency", "fairness", "scale", "xmin")
        for row in results.get(section, [])
        if "error" in row
    ]
    if errors:
        lines += ["### Errors", "", *errors, ""]
    for title, path in charts.items():
        lines += [f"![{title}]({path})", ""]
    return "\n".join(lines)


def charts(results: Results, folder: Path, prefix: str) -> dict[str, str]:
    """Draw throughput-vs-workers and latency-CDF charts into *folder*; return title -> file."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: dict[str, str] = {}
    workers = results["meta"]["sizes"]["workers"]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=80)
    ax.set_prop_cycle(color=[plt.get_cmap("tab20")(i) for i in range(20)])
    series: dict[str, list[tuple[int, float]]] = {}
    for row in results.get("drain", []):
        if "error" in row:
            continue
        label = row["system"] if row["batch"] == 1 else f"{row['system']} batch {row['batch']}"
        series.setdefault(label, []).append((row["workers"], row["rate"]))
    for label, points in series.items():
        points.sort()
        style = "o-" if len(points) > 1 else "s"
        ax.plot([p[0] for p in points], [p[1] for p in points], style, label=label, markersize=4)
    ax.set_xlabel("workers")
    ax.set_ylabel("messages/s")
    ax.set_xticks(list(workers))
    ax.set_yscale("log")
    ax.set_title("Drain throughput")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    name = f"{prefix}throughput.png"
    fig.savefig(folder / name)
    plt.close(fig)
    out["Drain throughput vs workers"] = name
    fig, ax = plt.subplots(figsize=(7, 4), dpi=80)
    for row in results.get("latency", []):
        if "error" in row or not row.get("cdf_ms"):
            continue
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
