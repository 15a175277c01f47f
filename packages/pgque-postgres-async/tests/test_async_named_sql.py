"""The ``-- name:`` block parser the PostgreSQL packages' SQL files go through."""

from __future__ import annotations

from pgque.postgres_async.named_sql import parse_named_sql

TEXT = """\
-- The file's own header: not a statement.
SET search_path = pgque;

-- name: claim
-- Lease the head of one claimable group.
SELECT *
  FROM pgque.claim(%(queue)s);

-- name: ack
SELECT pgque.ack(%(token)s);  -- a trailing comment stays: only whole comment lines go
-- name: not a name line
"""


def test_blocks_come_by_name_without_comment_lines() -> None:
    assert parse_named_sql(TEXT) == {
        "claim": "SELECT *\n  FROM pgque.claim(%(queue)s);",
        "ack": (
            "SELECT pgque.ack(%(token)s);  -- a trailing comment stays: only whole comment lines go"
        ),
    }


def test_order_is_the_files_and_a_later_block_of_a_name_wins() -> None:
    blocks = parse_named_sql("-- name: b\nSELECT 1;\n-- name: a\nSELECT 2;\n-- name: b\nSELECT 3;")
    assert list(blocks) == ["b", "a"]
    assert blocks == {"b": "SELECT 3;", "a": "SELECT 2;"}


def test_text_without_names_has_no_blocks() -> None:
    assert parse_named_sql("SELECT 1;\n-- name:\n--name: x\n") == {}
