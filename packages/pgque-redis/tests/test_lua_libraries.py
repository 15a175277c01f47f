"""The Lua libraries (``lua/lib/``) and what the scripts say they need of them.

A script's text is the prelude and the libraries it needs, then its own file (see
pgque.redis._scripts). A library left out of a script does not fail when the script is loaded:
Lua reads an unknown name as a global, and Redis raises only when that line runs. So these
tests read the Lua source itself:

- every name a whole script uses is defined in it before, or is one of the few globals Redis
  gives a script (``redis``, ``cjson``, ``KEYS``, ``string`` ...);
- every ``-- needs:`` line names exactly the libraries whose names the file uses (``keys``, the
  prelude, aside), and a library only libraries before it;
- no two libraries define one name, and no script defines a name a library does;
- the server compiles every script.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis

from pgque.redis._scripts import (
    LIBRARIES,
    OPERATIONS,
    PRELUDE,
    load_scripts,
    partition_script,
    script_needs,
)

LUA = Path(__file__).resolve().parents[1] / "src" / "pgque" / "redis" / "lua"

#: The partition scripts that run alone, on the keys their caller names.
ALONE = ("lock", "unlock", "slots", "reset_slots", "purge")

#: What a script may use that it does not define: what Redis gives every script (Lua 5.1's
#: base functions and libraries, and Redis's own).
GLOBALS = frozenset(
    {
        "redis",
        "cjson",
        "cmsgpack",
        "bit",
        "struct",
        "KEYS",
        "ARGV",
        "string",
        "table",
        "math",
        "tonumber",
        "tostring",
        "ipairs",
        "pairs",
        "next",
        "select",
        "unpack",
        "type",
        "error",
        "pcall",
        "assert",
    }
)

KEYWORDS = frozenset(
    {
        "and",
        "break",
        "do",
        "else",
        "elseif",
        "end",
        "false",
        "for",
        "function",
        "if",
        "in",
        "local",
        "nil",
        "not",
        "or",
        "repeat",
        "return",
        "then",
        "true",
        "until",
        "while",
    }
)

_LONG_BRACKET = re.compile(r"\[(=*)\[")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+|[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?")
_SYMBOLS = ("...", "..", "==", "~=", "<=", ">=")


def lua_tokens(source: str) -> list[tuple[str, str]]:
    """Return the tokens of Lua *source* as (kind, text), kind one of name, number, string and
    symbol; comments are left out."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(source)
    while i < n:
        char = source[i]
        long = _LONG_BRACKET.match(source, i + 2 if source.startswith("--", i) else i)
        if char.isspace():
            i += 1
        elif source.startswith("--", i) and long:
            i = source.index("]" + long.group(1) + "]", long.end()) + len(long.group(0))
        elif source.startswith("--", i):
            end = source.find("\n", i)
            i = n if end < 0 else end
        elif char in "'\"":
            j = i + 1
            while source[j] != char:
                j += 2 if source[j] == "\\" else 1
            out.append(("string", source[i : j + 1]))
            i = j + 1
        elif long:
            end = source.index("]" + long.group(1) + "]", long.end()) + len(long.group(0))
            out.append(("string", source[i:end]))
            i = end
        elif (number := _NUMBER.match(source, i)) is not None:
            out.append(("number", number.group(0)))
            i = number.end()
        elif (name := _NAME.match(source, i)) is not None:
            out.append(("name", name.group(0)))
            i = name.end()
        else:
            symbol = next((s for s in _SYMBOLS if source.startswith(s, i)), char)
            out.append(("symbol", symbol))
            i += len(symbol)
    return out


def outside_names(source: str) -> set[str]:
    """Return the names Lua *source* uses before it declares them itself (by ``local``, as a
    function's parameter or a loop's variable): those it takes from code before it, or from
    the globals. Fields (after ``.`` or ``:``, and the keys of ``{name = ...}``) are no names.

    Declarations count from where they stand to the end of the source, whatever their scope:
    the scripts never use one name both ways.
    """
    tokens = lua_tokens(source)
    texts = [text for _, text in tokens]
    declared: set[str] = set()
    used: set[str] = set()
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        before = texts[i - 1] if i else ""
        after = texts[i + 1] if i + 1 < len(texts) else ""
        if text == "local" and after == "function":
            declared.add(texts[i + 2])
            i += 1  # on to "function": its parameters are declared as any function's
        elif text == "local":
            i += 1
            while tokens[i][0] == "name":
                declared.add(texts[i])
                if texts[i + 1] != ",":
                    break
                i += 2
            i += 1
        elif text == "function":
            i += 1
            while texts[i] != "(":  # a function's name, if any, is used (or declared above)
                name_here = tokens[i][0] == "name" and texts[i - 1] not in {".", ":"}
                if name_here and texts[i] not in declared:
                    used.add(texts[i])
                i += 1
            while texts[i] != ")":
                if tokens[i][0] == "name":
                    declared.add(texts[i])
                i += 1
            i += 1
        elif text == "for":
            i += 1
            while texts[i] not in {"=", "in"}:
                if tokens[i][0] == "name":
                    declared.add(texts[i])
                i += 1
        else:
            field = before in {".", ":"} or (before in {"{", ","} and after == "=")
            if kind == "name" and text not in KEYWORDS and not field and text not in declared:
                used.add(text)
            i += 1
    return used


def top_level_names(source: str) -> list[str]:
    """Return the names Lua *source* declares at its top level (``local`` at a line's start:
    the files indent every inner block)."""
    return re.findall(r"^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)", source, re.MULTILINE)


def read(path: str) -> str:
    return (LUA / f"{path}.lua").read_text(encoding="utf-8")


def owners() -> dict[str, str]:
    """Return the library that defines each name a library defines."""
    found: dict[str, str] = {}
    for library in LIBRARIES:
        for name in top_level_names(read(f"lib/{library}")):
            assert name not in found, f"{name} is defined by {found[name]} and {library}"
            found[name] = library
    return found


#: Every file that runs on a queue's keys, and the text it is sent as.
ON_QUEUE = {
    **{f"lib/{name}": None for name in LIBRARIES},
    **{name: script.text for name, script in load_scripts().items()},
    "partition/publish_dedup": partition_script("publish_dedup").text,
}


def test_lib_holds_exactly_the_libraries() -> None:
    assert {path.stem for path in (LUA / "lib").glob("*.lua")} == set(LIBRARIES)
    assert LIBRARIES[: len(PRELUDE)] == PRELUDE


@pytest.mark.parametrize("path", sorted(ON_QUEUE))
def test_needs_names_exactly_the_libraries_a_file_calls(path: str) -> None:
    source = read(path)
    by = owners()
    called = {by[name] for name in outside_names(source) if name in by} - {"keys"}
    assert set(script_needs(source)) == called
    if path.startswith("lib/"):
        me = LIBRARIES.index(path.removeprefix("lib/"))
        assert all(LIBRARIES.index(need) < me for need in called), path
        assert called.isdisjoint({path.removeprefix("lib/")})


@pytest.mark.parametrize("name", [*OPERATIONS, "partition/publish_dedup"])
def test_a_script_uses_only_what_it_defines_and_what_redis_gives(name: str) -> None:
    text = ON_QUEUE[name]
    assert text is not None
    assert outside_names(text) <= GLOBALS, outside_names(text) - GLOBALS
    # Its own file does not hide a library's name (a second meaning of one name).
    assert not set(top_level_names(read(name))) & set(owners()), name


@pytest.mark.parametrize("name", ALONE)
def test_a_script_that_runs_alone_uses_no_library(name: str) -> None:
    source = read(f"partition/{name}")
    assert script_needs(source) == ()
    assert partition_script(name).text == source
    assert outside_names(source) <= GLOBALS


def test_a_library_missing_from_a_script_would_be_found() -> None:
    # ack.lua without the leases library: ack_lease would be read as a global.
    text = "\n".join(read(f"lib/{name}") for name in ("keys", "refusals", "clock", "store"))
    assert "ack_lease" in outside_names(f"{text}\n{read('ack')}")


def test_needs_refuses_what_is_no_library() -> None:
    assert script_needs("-- a script\n-- needs: clock, leases\nreturn 1\n") == ("clock", "leases")
    assert script_needs("-- a script\nreturn 1\n-- needs: clock\n") == ()
    with pytest.raises(ValueError, match="no library"):
        script_needs("-- needs: clock, lease\n")
    with pytest.raises(ValueError, match="no library"):
        script_needs("-- needs: keys\n")


def test_the_tokens_leave_strings_and_comments_out() -> None:
    source = "--[[ local x ]] local a = 'b -- c' .. [[d\n]] -- e\nreturn a.f, {g = h}, 1.5e3\n"
    assert outside_names(source) == {"h"}
    assert [text for kind, text in lua_tokens(source) if kind == "number"] == ["1.5e3"]


def test_the_server_compiles_every_script(raw_client: redis.Redis) -> None:
    scripts = [*load_scripts().values()]
    scripts += [partition_script(name) for name in (*ALONE, "publish_dedup")]
    for script in scripts:
        assert raw_client.script_load(script.text) == script.sha, script.name
