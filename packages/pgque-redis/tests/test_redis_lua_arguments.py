"""Lua receives data only as KEYS and ARGV: no code is built from user text, by construction.

- The scripts are the package's ``.lua`` files, verbatim (an operation's libraries, then its own
  file): their text (and so their SHA) does not depend on any input.
- Python sends them only by SHA (``EVALSHA``) or loads the fixed text (``SCRIPT LOAD``); it never
  calls ``EVAL`` with a string it built.
- Inside the scripts, nothing compiles or looks up code at run time (``load``, ``loadstring``,
  ``dofile``, ``require``, ``getfenv``/``setfenv``), every ``redis.call`` names its command as a
  literal, and no script runs a command that reaches beyond the queue (``EVAL``, ``SCRIPT``,
  ``CONFIG``, ``FLUSH*``, ``KEYS``, ``SCAN`` of the keyspace, ``SELECT``).
- Behaviour: group ids and data full of Lua and RESP metacharacters create keys under the queue's
  prefix only and leave every other key alone.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import redis

from pgque.core import Event
from pgque.redis._scripts import LIBRARIES, OPERATIONS, PRELUDE, load_scripts, script_needs

ROOT = Path(__file__).resolve().parents[3]
LUA_FILES = sorted(ROOT.glob("packages/*/src/pgque/*/lua/**/*.lua"))
PY_SOURCES = sorted(path for path in ROOT.glob("packages/*/src/**/*.py"))

FORBIDDEN_LUA = re.compile(r"\b(loadstring|load|dofile|require|getfenv|setfenv|_G)\b")
FORBIDDEN_COMMANDS = {
    "EVAL",
    "EVALSHA",
    "SCRIPT",
    "CONFIG",
    "FLUSHALL",
    "FLUSHDB",
    "KEYS",
    "SCAN",
    "SELECT",
    "MOVE",
    "SWAPDB",
}


def _code(path: Path) -> str:
    """Return the Lua source without comments."""
    return re.sub(r"--[^\n]*", "", path.read_text(encoding="utf-8"))


def test_the_scan_finds_the_scripts() -> None:
    names = {path.stem for path in LUA_FILES}
    assert set(OPERATIONS) | set(LIBRARIES) <= names


def test_scripts_are_the_files_verbatim() -> None:
    folder = ROOT / "packages/pgque-redis/src/pgque/redis/lua"

    def read(path: str) -> str:
        return (folder / f"{path}.lua").read_text(encoding="utf-8")

    for name, script in load_scripts().items():
        own = read(name)
        # The prelude, what the script needs, what those need, ... in the order of LIBRARIES.
        wanted, step = set(PRELUDE), set(script_needs(own))
        while step - wanted:
            wanted |= step
            step = {need for lib in wanted for need in script_needs(read(f"lib/{lib}"))}
        parts = [read(f"lib/{lib}") for lib in LIBRARIES if lib in wanted]
        assert script.text == "\n".join([*parts, own])


def test_scripts_neither_compile_code_nor_reach_beyond_the_queue() -> None:
    for path in LUA_FILES:
        code = _code(path)
        assert not FORBIDDEN_LUA.search(code), (path.name, FORBIDDEN_LUA.search(code))
        calls = re.findall(r"redis\.p?call\(\s*([^,)]*)", code)
        for first in calls:
            literal = re.fullmatch(r"'([A-Z]+)'", first.strip())
            assert literal is not None, f"{path.name}: redis.call({first} ...) is not a literal"
            assert literal.group(1) not in FORBIDDEN_COMMANDS, (path.name, literal.group(1))
        # KEYS only by constant index: the queue's prefix (or the partition layer's keys).
        for index in re.findall(r"KEYS\[([^\]]*)\]", code):
            assert index.strip().isdigit(), (path.name, index)


def test_python_sends_scripts_only_by_sha_or_their_fixed_text() -> None:
    seen = 0
    for path in PY_SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            method = node.func.attr
            # EVALSHA by a script's sha; EVAL (a forgotten script, run and cached again) and
            # SCRIPT LOAD only of a script's fixed text, never of text built at run time.
            if method in {"evalsha", "script_load", "eval"}:
                seen += 1
                first = node.args[0]
                wanted = "sha" if method == "evalsha" else "text"
                assert isinstance(first, ast.Attribute), f"{path}:{node.lineno}: {method}"
                assert first.attr == wanted, f"{path}:{node.lineno}: {method} of built text"
    assert seen >= 4


HOSTILE = (
    "]] .. redis.call('FLUSHALL') .. [[",
    "'); redis.call('DEL', KEYS[1]); --",
    "*",
    "{pgque:victim}:msg",
    "\r\n*1\r\n$8\r\nFLUSHALL\r\n",
    "%s %d %q",
)


def test_lua_metacharacters_stay_data_and_stay_in_the_queue(
    transport_factory: Any, raw_client: redis.Redis
) -> None:
    victim = transport_factory()
    victim.publish("keep", Event(kind="k"))
    # A key outside pgque entirely, with a name the hostile text tries to reach.
    outside = f"outside-{victim.queue}"
    raw_client.set(outside, "untouched")
    try:
        before = set(raw_client.scan_iter(match=victim.key_prefix + "*"))
        transport = transport_factory()
        for text in HOSTILE:
            transport.publish(text, Event(kind=text, data={text: text}, headers={"h": text}))
        keys = {k.decode() for k in raw_client.scan_iter(match=transport.key_prefix + "*")}
        assert {f"{transport.key_prefix}g:{text}" for text in HOSTILE} <= keys
        leases = transport.claim_many(len(HOSTILE))
        assert sorted(lease.group_id for lease in leases) == sorted(HOSTILE)
        for lease in leases:
            assert lease.event.data == {lease.group_id: lease.group_id}
            assert transport.ack(lease)
        assert raw_client.get(outside) == b"untouched"
        assert set(raw_client.scan_iter(match=victim.key_prefix + "*")) == before
        assert victim.stats().messages == 1
    finally:
        raw_client.delete(outside)
