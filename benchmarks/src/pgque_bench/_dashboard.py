"""The dashboard's pages over a big queue (issue 33): how long each page takes to answer.

:func:`pages` creates a throwaway database on the PostgreSQL server, installs pgque's schema and
fills one queue in SQL (``shared-sql/bench.sql``, the ``dashboard_*`` statements): *groups*
groups of one message each (every 1,000th blocked, every 997th paused), *history* job-history
records over the last five days (three per message: two failed attempts and the ack, every
10,000th message dead-lettered instead; 20 kinds, and a rare one of every 100,000th message;
history kept 7 days) and 9 workers (8 alive, each holding 8 leases, and one gone holding 4).
Then it serves the dashboard (``create_app``) with uvicorn on a free port of 127.0.0.1 in this
process and asks for each page over HTTP, as a browser would (one kept-alive connection).

Every page is asked *warmup* times first (pools, prepared statements, the refresher's first
counts), then *requests* times, one request per page per round, the pages in a new random order
each round. The result is each page's median, lowest and highest answer time, and the slowest
page's median (the target). The database is dropped at the end, also after a failure.
"""

from __future__ import annotations

import http.client
import random
import socket
import statistics
import threading
import time
import uuid
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
from psycopg import sql

from pgque_bench._common import bench_sql, event_text

__all__ = ["page_paths", "pages"]

#: Days of history (the last five whole days before today), each an equal share of records.
_DAYS = 5
#: History INSERTs are cut into statements of at most this many records.
_CHUNK = 1_000_000
#: Alive workers, the leases each holds; the gone worker's leases.
_WORKERS = 8
_LEASES = 8
_GONE_LEASES = 4


def _group(n: int) -> str:
    return "g" + str(n).zfill(7)


def page_paths(queue: str, groups: int, message_id: int) -> dict[str, str]:
    """The pages timed: name -> path."""
    q = "/queues/" + quote(queue, safe="")
    middle = _group(groups // 2 + 1)
    return {
        "overview": "/",
        "groups": f"{q}/groups",
        f"group {middle}": f"{q}/groups/{middle}",
        "workers": f"{q}/workers",
        "history": f"{q}/history",
        f"message {message_id}'s story": f"{q}/history?message={message_id}",
        f"history of group {middle}": f"{q}/history?group={middle}",
        "history of kind k7": f"{q}/history?kind=k7",
        "history of the rare kind": f"{q}/history?kind=rare",
        "history of the dead letters": f"{q}/history?outcome=dead_lettered",
    }


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def _fill(url: str, queue: str, groups: int, history: int) -> dict[str, float]:
    """Install the schema and fill *queue*; seconds each step took."""
    from pgque.postgres import install_schema

    q = bench_sql()
    took: dict[str, float] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        install_schema(conn)
        row = conn.execute(q["server_now"]).fetchone()
        assert row is not None
        now = float(row[0])
        started = time.perf_counter()
        base = {"queue": queue, "now": now}
        conn.execute(q["dashboard_groups"], {**base, "groups": groups, "event": event_text()})
        took["groups_s"] = time.perf_counter() - started
        started = time.perf_counter()
        conn.execute(q["dashboard_history_on"], base)
        today = int(now // 86400)
        first_day = today - _DAYS
        for day in range(first_day, today, 3):
            conn.execute(q["dashboard_days"], {"day": day})
        per_day = history // _DAYS
        first = 3  # message 1's first record
        for day in range(first_day, today):
            left = per_day
            while left > 0:
                rows = min(left, _CHUNK)
                params = {**base, "rows": rows, "first": first, "day": day, "groups": groups}
                conn.execute(q["dashboard_history"], params)
                first += rows
                left -= rows
        took["history_s"] = time.perf_counter() - started
        started = time.perf_counter()
        for w in range(_WORKERS + 1):
            gone = w == _WORKERS
            holder = f"bench-host:{1000 + w}"
            conn.execute(
                q["dashboard_heartbeat"],
                {**base, "worker_id": f"worker-{w}", "holder": holder, "pid": 1000 + w,
                 "now": now - 600 if gone else now},
            )  # fmt: skip
            for slot in range(_GONE_LEASES if gone else _LEASES):
                group_id = _group(1 + w * 100 + slot * 7)
                conn.execute(
                    q["dashboard_lease"],
                    {**base, "group_id": group_id, "holder": holder, "slot": slot},
                )
        conn.execute(q["dashboard_analyze"])
        took["analyze_s"] = time.perf_counter() - started
    return took


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _get(conn: http.client.HTTPConnection, path: str) -> float:
    """Seconds to ask for *path* and read the whole answer; raises on a status other than 200."""
    started = time.perf_counter()
    conn.request("GET", path)
    answer = conn.getresponse()
    body = answer.read()
    seconds = time.perf_counter() - started
    if answer.status != 200:
        raise RuntimeError(f"GET {path}: {answer.status} {body[:200]!r}")
    return seconds


def _time_pages(
    url: str, queue: str, paths: dict[str, str], requests: int, warmup: int
) -> dict[str, list[float]]:
    import uvicorn

    from pgque.dashboard import create_app

    app = create_app(url + ("&" if "?" in url else "?") + f"queue={quote(queue)}")
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the dashboard's server did not start")
        time.sleep(0.02)
    samples: dict[str, list[float]] = {page: [] for page in paths}
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            for _ in range(warmup):
                for path in paths.values():
                    _get(conn, path)
            for _ in range(requests):
                order = list(paths.items())
                random.shuffle(order)
                for page, path in order:
                    samples[page].append(_get(conn, path))
        finally:
            conn.close()
    finally:
        server.should_exit = True
        thread.join(30)
    return samples


def pages(
    postgres_url: str, groups: int, history: int, requests: int, warmup: int = 3
) -> dict[str, Any]:
    """The scenario of the module docstring on a throwaway database of *postgres_url*'s
    server: *groups* groups, *history* history records; each page's answer times."""
    name = f"pgque_bench_dash_{uuid.uuid4().hex[:10]}"
    queue = "dash"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        target = _with_database(postgres_url, name)
        took = _fill(target, queue, groups, history)
        message_id = history // 6  # a message in the middle: its three records
        paths = page_paths(queue, groups, message_id)
        samples = _time_pages(target, queue, paths, requests, warmup)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
    results: dict[str, dict[str, Any]] = {
        page: {
            "path": paths[page],
            "median_ms": statistics.median(values) * 1000,
            "low_ms": min(values) * 1000,
            "high_ms": max(values) * 1000,
        }
        for page, values in samples.items()
    }
    medians = {page: float(r["median_ms"]) for page, r in results.items()}
    slowest = max(medians, key=medians.__getitem__)
    return {
        "groups": groups,
        "history": history,
        "requests": requests,
        "warmup": warmup,
        **{key: round(value, 1) for key, value in took.items()},
        "pages": results,
        "slowest_page": slowest,
        "slowest_ms": results[slowest]["median_ms"],
    }
