"""The Lua scripts of the Redis transports and their partition adapters, read from the package's
``lua/`` folder and assembled once per process.

Layout of ``lua/``:

- ``<operation>.lua``: one file per operation of the transports (:data:`OPERATIONS`);
- ``lib/<library>.lua``: the code the operations share, one library per concept
  (:data:`LIBRARIES`);
- ``partition/<name>.lua``: the partition adapters' scripts.

A script that runs on a queue's keys (every operation, and ``partition/publish_dedup.lua``) is
sent as one text: the libraries it needs, in the order of :data:`LIBRARIES`, then its own file.
The comment that opens a file names the libraries its code calls, in a line of its own:
``-- needs: clock, store, leases``. A library names those it calls in the same way, and every
one of them comes before it in :data:`LIBRARIES`, so a script's text defines every name before
its first use. Whatever it needs, such a script starts with the :data:`PRELUDE`. The other
partition scripts run alone, on the keys their caller names.

Each script is sent whole, by its SHA1 (``EVALSHA``; ``EVAL`` of its text when Redis answers
``NOSCRIPT``), so every operation is one atomic call. Scripts only ever receive keys and
arguments; no code is built from user text.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

__all__ = [
    "Script",
    "OPERATIONS",
    "LIBRARIES",
    "PRELUDE",
    "load_scripts",
    "partition_script",
    "script_needs",
]

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
    "key_policy",
    "key_infos",
    "heartbeat",
    "goodbye",
    "workers",
    "set_history",
    "history",
    "messages_page",
    "find_message",
)

#: The libraries of ``lua/lib/``, in the one order a script's text holds them; each calls only
#: libraries before it.
LIBRARIES = (
    # KEYS and the flags every script receives; every key of the queue, and the key layout.
    "keys",
    # refuse(): a refusal the client raises as a typed error; and the first refusal, of a
    # queue this node does not hold.
    "refusals",
    # The script's "now" (the caller's or the server's TIME), and times as text.
    "clock",
    # The queue's meta key (it lives here; the store's identity) and its data's key layout.
    "store",
    # Wake-ups of idle workers on the queue's channel.
    "wakeups",
    # A message's records, and the index of group heads.
    "messages",
    # The job history: its setting, and a settlement's record in the queue's stream.
    "history",
    # A group's fairness key and the key's indexes, key policies and token buckets.
    "fairness",
    # A group's hash and the ready set or index that lists it; freeing a group.
    "groups",
    # A group described as group(), groups() and oldest_groups() show it.
    "group_info",
    # Publishing at a group's tail, scheduling, and scheduled messages joining when due.
    "enqueue",
    # Moving a message to the dead letters.
    "dead_letters",
    # The fence of a lease and its four settlements (ack, nack, release, dead_letter).
    "leases",
    # Leasing the heads of claimable groups.
    "claims",
    # A message as messages() and message(id) show it: kind, event id, data preview.
    "browse",
)

#: The libraries every script on a queue's keys starts with, whether it calls them or not:
#: they take the flags off ``ARGV`` and refuse a queue this node does not hold before anything
#: else runs. (``keys`` is never named in a needs line: everything may use it.)
PRELUDE = ("keys", "refusals")

#: The partition adapters' scripts that run on a queue's keys as the operations do (after the
#: prelude and the libraries they need); the others run alone.
_PARTITION_ON_QUEUE = frozenset({"publish_dedup"})

_NEEDS = re.compile(r"-- needs: ([a-z_]+(?:, [a-z_]+)*)")


@dataclass(frozen=True)
class Script:
    """One script's whole Lua text and its SHA1 (the EVALSHA handle)."""

    name: str
    text: str
    sha: str


def _read(path: str) -> str:
    return (files("pgque.redis") / "lua" / f"{path}.lua").read_text(encoding="utf-8")


def script_needs(text: str) -> tuple[str, ...]:
    """Return the libraries a script or library's opening comment names in its ``-- needs:``
    line (none without one). Raises ValueError for a name that is no library."""
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        found = _NEEDS.fullmatch(line)
        if found:
            names = tuple(found.group(1).split(", "))
            unknown = [name for name in names if name not in LIBRARIES or name == "keys"]
            if unknown:
                raise ValueError(f"-- needs: names no library of lua/lib/ (but keys): {unknown}")
            return names
    return ()


def _with_libraries(path: str) -> str:
    """Return the text of the script at *path* on a queue's keys: the prelude and every library
    it needs (what those need included), in the order of LIBRARIES, then its own file."""
    own = _read(path)
    wanted = set(PRELUDE)
    pending = list(script_needs(own))
    while pending:
        name = pending.pop()
        if name not in wanted:
            wanted.add(name)
            needs = script_needs(_read(f"lib/{name}"))
            later = [need for need in needs if LIBRARIES.index(need) > LIBRARIES.index(name)]
            if later:
                raise ValueError(f"lua/lib/{name}.lua needs libraries after it: {later}")
            pending.extend(needs)
    parts = [_read(f"lib/{name}") for name in LIBRARIES if name in wanted]
    return "\n".join([*parts, own])


def _script(name: str, text: str) -> Script:
    sha = hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()
    return Script(name, text, sha)


@cache
def load_scripts() -> dict[str, Script]:
    """Return every operation's script, keyed by operation name (read once per process)."""
    return {name: _script(name, _with_libraries(name)) for name in OPERATIONS}


@cache
def partition_script(name: str) -> Script:
    """Return the partition adapters' script ``lua/partition/<name>.lua``: after the prelude
    and its libraries when it runs on a queue's keys (``publish_dedup``), else alone."""
    path = f"partition/{name}"
    return _script(name, _with_libraries(path) if name in _PARTITION_ON_QUEUE else _read(path))
