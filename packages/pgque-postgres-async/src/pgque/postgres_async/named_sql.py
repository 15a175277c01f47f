"""Named SQL blocks: one ``.sql`` file holding many statements, each under a ``-- name:`` line.

pgque keeps its SQL in ``.sql`` files (never in Python strings); a file of queries reads::

    -- name: claim
    -- Lease the head of one claimable group.
    SELECT * FROM pgque.claim_v3(%(queue)s, %(visibility)s);

    -- name: ack
    SELECT pgque.ack_v2(%(queue)s, %(token)s);

This module only parses such text and imports no driver: the PostgreSQL packages read their
files with it, and so may anything that keeps SQL the same way (the benchmarks do). The
blocking package's copy, ``pgque.postgres.named_sql``, is generated from this one.
"""

from __future__ import annotations

import re

__all__ = ["parse_named_sql"]

_NAME = re.compile(r"^-- name: ([a-z_]+)\s*$", re.MULTILINE)


def parse_named_sql(text: str) -> dict[str, str]:
    """Return the statements of *text* by name, in file order.

    A block runs from its ``-- name: x`` line (a lowercase name of letters and ``_``) to the
    next; lines starting with ``--`` inside it (comments) are dropped and the rest is stripped.
    Text before the first name line is ignored; a later block of the same name wins. Raises
    nothing.
    """
    parts = _NAME.split(text)
    out: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.strip().splitlines() if not line.startswith("--")]
        out[name] = "\n".join(lines).strip()
    return out
