"""hashtextextended in Python equals PostgreSQL's, bit for bit, on 10,000 keys."""

from __future__ import annotations

import random
from pathlib import Path

import psycopg
import pytest

from pgque.partition import hashtextextended, slot_for
from pgque.postgres.named_sql import parse_named_sql

#: The PostgreSQL packages' partition statements (shipped in their wheels from shared-sql/).
PARTITION_QUERIES = Path(__file__).resolve().parents[3] / "shared-sql" / "partition_queries.sql"


def _hash_keys_sql() -> str:
    return parse_named_sql(PARTITION_QUERIES.read_text(encoding="utf-8"))["hash_keys"]


def _keys() -> list[str]:
    rng = random.Random(20261130)
    keys = ["", "a", "tenant:42", "migrate:tenant:42:v3", "é", "日本語", "🙂", "x" * 12, "y" * 13]
    alphabet_ascii = [chr(c) for c in range(1, 128)]
    alphabet_uni = ["é", "ß", "Ж", "日", "本", "🙂", "𝄞", "\u200b", "ǅ", "ﬀ"]
    for i in range(2500):
        keys.append(f"tenant:{i}")
    while len(keys) < 5000:
        size = rng.choice([0, 1, 3, 4, 11, 12, 13, 23, 24, 25, 64])
        keys.append("".join(rng.choice(alphabet_ascii) for _ in range(size)))
    while len(keys) < 8500:
        size = rng.randint(1, 40)
        keys.append("".join(rng.choice(alphabet_uni + alphabet_ascii) for _ in range(size)))
    while len(keys) < 10000:
        size = rng.choice([100, 255, 256, 1000, 4096, 10000])
        keys.append("".join(rng.choice(alphabet_uni + alphabet_ascii) for _ in range(size)))
    return keys


def test_hashtextextended_matches_postgres_on_10000_keys(postgres_url: str) -> None:
    keys = _keys()
    assert len(keys) == 10000
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        rows = conn.execute(_hash_keys_sql(), {"keys": keys}).fetchall()
    server = [int(r[0]) for r in rows]
    mismatches = [k for k, h in zip(keys, server, strict=True) if hashtextextended(k) != h]
    assert mismatches == []
    # Both signs occur, so slot_for's sign handling is exercised.
    assert any(h < 0 for h in server)
    assert any(h > 0 for h in server)
    for k, h in zip(keys[:2000], server[:2000], strict=True):
        for n in (1, 7, 16, 256):
            assert slot_for(k, n) == ((h % n) if h >= 0 else -((-h) % n)) % n


def test_hashtextextended_with_a_seed_matches_postgres(postgres_url: str) -> None:
    keys = _keys()[:300]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for seed in (1, -1, 2**40 + 7):
            rows = conn.execute(
                "SELECT hashtextextended(k, %s::bigint) FROM unnest(%s::text[]) WITH ORDINALITY"
                " AS u(k, n) ORDER BY n",
                (seed, keys),
            ).fetchall()
            assert [hashtextextended(k, seed) for k in keys] == [int(r[0]) for r in rows]


def test_slot_for_refuses_bad_counts() -> None:
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError):
            slot_for("k", bad)  # type: ignore[arg-type]
