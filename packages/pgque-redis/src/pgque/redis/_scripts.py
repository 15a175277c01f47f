"""The Lua scripts of the Redis transport, read from the package's ``lua/`` folder.

Each operation is one script: ``common.lua`` (shared helpers and the key layout) followed by the
operation's own file. Scripts only ever receive keys and arguments; no code is built from user
text.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

__all__ = ["Script", "OPERATIONS", "load_scripts"]

OPERATIONS = (
    "publish",
    "claim",
    "ack",
    "settle_claim",
    "nack",
    "extend",
    "release",
    "dead_letter",
    "dead_letters",
    "delete_dead_letters",
    "redrive",
    "unblock",
    "retry_now",
    "pause",
    "resume",
    "group",
    "groups",
    "oldest_groups",
    "stats",
    "purge",
    "cancel",
    "scheduled",
    "publish_tick",
    "last_tick",
    "next_due",
    "join_due",
    "store_id",
    "server_time",
)


@dataclass(frozen=True)
class Script:
    """One operation's Lua source and its SHA1 (the EVALSHA handle)."""

    name: str
    text: str
    sha: str


def _read(name: str) -> str:
    return (files("pgque.redis") / "lua" / f"{name}.lua").read_text(encoding="utf-8")


@cache
def load_scripts() -> dict[str, Script]:
    """Return every operation's script, keyed by operation name (read once per process)."""
    common = _read("common")
    scripts: dict[str, Script] = {}
    for name in OPERATIONS:
        text = f"{common}\n{_read(name)}"
        sha = hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()
        scripts[name] = Script(name, text, sha)
    return scripts
