"""Browse and search on PostgreSQL (56_browse.sql): a prefix's groups are a range of an index
that ends where the prefix's ids end, a group's messages a range of messages_head, and the SQL
end of a prefix is the Python one, bit for bit.

The plans are those of the real functions, reported by ``auto_explain`` for their nested
statements, over 20,000 groups in an uncommitted transaction (rolled back after).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.rows import TupleRow

from pgque.conformance.plans import describe, explaining, index_scans, rows_read, seq_scans
from pgque.core import Event
from pgque.core.browse import prefix_end

GROUPS = 20_000

MAKE_GROUPS = """
INSERT INTO pgque_fifo.groups (queue, group_id, priority, until, token, paused, blocked)
SELECT %(queue)s, 'g' || lpad(i::text, 6, '0'), i %% 5,
       CASE WHEN i %% 400 IN (1, 2) THEN %(now)s + 600 ELSE %(now)s - i END,
       CASE WHEN i %% 400 = 1 THEN md5(i::text) END,
       i %% 1000 = 3, i %% 1000 = 4
  FROM generate_series(1, %(n)s) AS i
"""
MAKE_MESSAGES = """
INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at)
SELECT %(queue)s, 'g' || lpad((1 + i %% %(n)s)::text, 6, '0'), %(event)s, %(now)s
  FROM generate_series(1, 3 * %(n)s) AS i
"""
PAGE = "SELECT group_id, state FROM pgque_fifo.pgque_groups_prefixed_v1(%s, %s, 100, %s, %s, NULL)"
BigQueue = tuple[psycopg.Connection[TupleRow], str]


@pytest.fixture
def big_queue(postgres_url: str) -> Iterator[BigQueue]:
    """Yield (connection, queue) with 20,000 groups in an open transaction, rolled back after."""
    queue = f"t_{uuid.uuid4().hex[:24]}"
    with psycopg.connect(postgres_url) as conn:
        now = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
        assert now is not None
        params = {"queue": queue, "now": now[0], "n": GROUPS, "event": Event(kind="x").to_json()}
        conn.execute(MAKE_GROUPS, params)
        conn.execute(MAKE_MESSAGES, params)
        conn.execute("ANALYZE pgque_fifo.groups")
        conn.execute("ANALYZE pgque_fifo.messages")
        yield conn, queue
        conn.rollback()


@pytest.mark.parametrize("state", [None, "ready", "leased", "parked", "paused", "blocked"])
def test_a_prefix_page_reads_only_the_prefix_range(big_queue: BigQueue, state: str | None) -> None:
    conn, queue = big_queue
    plans = explaining(conn, analyze=True)
    # g01xxxx: 1,000 groups of 20,000 (and ids after them are never read).
    rows = conn.execute(PAGE, (queue, state, None, "g01")).fetchall()
    assert rows, "the page is empty: the data does not exercise this state"
    assert all(g.startswith("g01") for g, _s in rows)
    assert all(row_state == (state or row_state) for _g, row_state in rows)
    pages = [p for p in plans if "v_end" in p["Query Text"]]
    assert len(pages) == 1, describe(plans)
    (plan,) = pages
    assert seq_scans(plan) == [], describe(plan)
    used = index_scans(plan)
    assert used, describe(plan)
    # Whatever the index, the scan never reads past the prefix's 1,000 groups.
    assert sum(rows_read(plan, index) for index in set(used)) <= 1000 + 100, describe(plan)


def test_a_prefix_past_every_group_reads_nothing(big_queue: BigQueue) -> None:
    conn, queue = big_queue
    plans = explaining(conn, analyze=True)
    assert conn.execute(PAGE, (queue, None, None, "h")).fetchall() == []
    (plan,) = [p for p in plans if "v_end" in p["Query Text"]]
    assert sum(rows_read(plan, index) for index in set(index_scans(plan))) == 0


def test_a_groups_messages_are_a_range_of_its_index(big_queue: BigQueue) -> None:
    conn, queue = big_queue
    plans = explaining(conn, analyze=True)
    rows = conn.execute(
        "SELECT message_id, is_head, page_cursor FROM pgque_fifo.pgque_messages_v1("
        "%s, 'g000007', NULL, 2, NULL, NULL)",
        (queue,),
    ).fetchall()
    # Two messages, then the row that carries next_after (the group holds three).
    assert [head for _m, head, _c in rows[:2]] == [True, False]
    assert rows[2][0] is None
    assert rows[2][2] == rows[1][2]
    listing = [p for p in plans if "p_group_id IS NOT NULL" in p["Query Text"]]
    assert listing, describe(plans)
    assert seq_scans(listing) == [], describe(listing)
    assert "messages_head" in index_scans(listing), describe(listing)


@pytest.mark.parametrize(
    "prefix",
    ["a", "ab", "a\U0010ffff", "\U0010ffff", "\U0010ffff\U0010ffff", "x\ud7ff", "é", "z\uffff"],
)
def test_the_sql_prefix_end_is_the_python_one(postgres_url: str, prefix: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        row = conn.execute("SELECT pgque_fifo.pgque_prefix_end_v1(%s)", (prefix,)).fetchone()
    assert row is not None
    assert row[0] == prefix_end(prefix)
