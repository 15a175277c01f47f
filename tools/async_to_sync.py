"""Generate the blocking twin of each asyncio source file, so the two never drift.

The async code is the source of truth. Each job names a source and its generated twin: the
``JOBS`` below and the lines of ``tools/async_to_sync_jobs.txt``. The conversion reads the
source's tokens (the standard library's ``tokenize``) and changes them one by one; no pattern
is run over a whole file. Its rules, in the order they apply:

1. Markers. A line whose comment ends with ``# async-only`` is dropped. A line holding nothing
   but a comment ``# sync: CODE`` becomes ``CODE`` at the comment's indentation, and the rules
   below apply to it as to any code. In a docstring the same markers work on its lines: a
   docstring line ending with ``# async-only`` is dropped, a docstring line ``# sync: TEXT``
   becomes ``TEXT``. A marker in any other string is an error.
2. Keywords. ``async`` before ``def``, ``with`` or ``for`` is dropped (in comprehensions too),
   and so is every ``await``.
3. Code renames. A rename ``FROM=TO`` (``COMMON_NAMES`` for every job, then the job's own, in
   ``JOBS`` or the jobs file) whose ``FROM`` starts with a letter or ``_`` and holds no space
   renames code: ``AsyncTransport``, ``__aenter__``, ``asyncio.sleep``, ``Awaitable[bool]``.
   Its tokens are replaced by ``TO`` wherever the code has the same tokens in a row (the
   longest ``FROM`` first; spacing between tokens does not count), names and attributes alike.
4. Names in strings. Strings name code too: ``__all__``, a fixture's name, a package for
   ``importlib.resources``, a ``__repr__``, an error message naming a class, a docstring's
   ``:class:`` reference. So in a string token (docstrings and f-strings included) a code
   rename's ``FROM`` standing as a whole word (no letter, digit or ``_`` either side) is
   replaced. That is all that changes in a string: ``async`` and ``await`` in one are text.
5. Prose. A rename whose ``FROM`` is not code (``(asyncio API)``, ``The asyncio worker``) is
   replaced as written, in docstrings only. Comments are copied unchanged (``AsyncTransport``
   in a comment stays). So a comment or a docstring says what is true of both twins, or the
   source gives each twin its own line with a marker (rule 1).
6. Checks and form. The twin must parse and hold no ``await`` and no ``async def``, ``async
   with`` or ``async for`` (an ``await`` inside an f-string, which rule 2 does not see, fails
   here). Ruff then sorts its imports, removes the ones left unused and formats it, and it
   starts with the DO-NOT-EDIT header naming its source.

An f-string is one string on every Python version (3.12 and later tokenize its parts; they are
taken together), so a twin is the same whichever Python generates it.

Usage: ``python tools/async_to_sync.py`` writes every twin; ``--check`` fails (exit 1) if any
twin differs from what would be generated (``nox -s lint`` runs it).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import io
import re
import shutil
import subprocess
import sys
import tempfile
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Renames applied to every job (rules 3 to 5), before the job's own.
COMMON_NAMES: dict[str, str] = {
    "AsyncTransport": "Transport",
    "AsyncInMemoryTransport": "InMemoryTransport",
    "AsyncSupportsWakeups": "SupportsWakeups",
    "AsyncSupportsPurge": "SupportsPurge",
    "AsyncSupportsServerTime": "SupportsServerTime",
    "AsyncScheduler": "Scheduler",
    "AsyncWakeupWaiter": "WakeupWaiter",
    "AsyncIterator": "Iterator",
    "AsyncIterable": "Iterable",
    "AsyncGenerator": "Generator",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": "__next__",
    "aclose": "close",
    "asyncio.sleep": "time.sleep",
    "asyncio.Lock": "threading.Lock",
    "asyncio.Event": "threading.Event",
    "atransport": "transport",
    "amake": "make",
    "async_transport_factory": "transport_factory",
    "connect_async": "connect",
    "AsyncClient": "Client",
    "AsyncDriver": "Driver",
    "AsyncStoreClient": "StoreClient",
    "AsyncWakeupsClient": "WakeupsClient",
    "AsyncStoreDriver": "StoreDriver",
    "AsyncWakeupsDriver": "WakeupsDriver",
    "AsyncHistoryClient": "HistoryClient",
    "AsyncBrowseClient": "BrowseClient",
    "AsyncOutboxClient": "OutboxClient",
    "AsyncOutboxDriver": "OutboxDriver",
    "AsyncSettleIn": "SettleIn",
    "AsyncSettleInClient": "SettleInClient",
    "AsyncSettleInDriver": "SettleInDriver",
    "AsyncBrowseDriver": "BrowseDriver",
    "AsyncSupportsBrowse": "SupportsBrowse",
    "AsyncHistoryDriver": "HistoryDriver",
    "AsyncSupportsHistory": "SupportsHistory",
    "AsyncWorkersClient": "WorkersClient",
    "AsyncWorkersDriver": "WorkersDriver",
    "AsyncSupportsWorkers": "SupportsWorkers",
    "AsyncFairnessClient": "FairnessClient",
    "AsyncFairnessDriver": "FairnessDriver",
    "AsyncSupportsFairness": "SupportsFairness",
    "AsyncSupportsSettleIn": "SupportsSettleIn",
    "AsyncSettleTransaction": "SettleTransaction",
}


@dataclass(frozen=True)
class Job:
    source: str
    target: str
    names: dict[str, str] = field(default_factory=dict)


JOBS: list[Job] = [
    Job(
        "packages/pgque-core/src/pgque/core/memory/_async.py",
        "packages/pgque-core/src/pgque/core/memory/_sync.py",
        {
            "asyncio in-memory transport": "blocking in-memory transport",
            "(asyncio API)": "(blocking API)",
        },
    ),
]


def _extra_jobs() -> list[Job]:
    """Jobs declared by packages in ``tools/async_to_sync_jobs.txt`` (one per line).

    A source ending in ``/`` is a package: every ``.py`` file in it gets a twin of the same name
    in the target package (also ending in ``/``), with the line's renames.
    """
    path = ROOT / "tools" / "async_to_sync_jobs.txt"
    jobs: list[Job] = []
    if not path.exists():
        return jobs
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        pairs = dict(pair.split("=", 1) for pair in parts[2:])
        names = {k.replace("+", " "): v.replace("+", " ") for k, v in pairs.items()}
        source, target = parts[0], parts[1]
        if source.endswith("/") != target.endswith("/"):
            raise ValueError(f"async_to_sync_jobs.txt: {source} and {target} must both be packages")
        if not source.endswith("/"):
            jobs.append(Job(source, target, names))
            continue
        for file in sorted((ROOT / source).glob("*.py")):
            jobs.append(Job(source + file.name, target + file.name, names))
    return jobs


def _orphans(jobs: list[Job]) -> list[Path]:
    """Return generated files in a target package whose async source no longer exists."""
    targets = {ROOT / job.target for job in jobs}
    folders = {target.parent for target in targets}
    orphans: list[Path] = []
    for folder in sorted(folders):
        for file in sorted(folder.glob("*.py")):
            if file not in targets and file.read_text().startswith(_HEADER_START):
                orphans.append(file)
    return orphans


#: How every generated file starts (a file that starts so and has no source is stale).
_HEADER_START = "# WARNING: generated by tools/async_to_sync.py"

_ASYNC_ONLY = "# async-only"
_SYNC = "# sync: "

#: Tokens that hold no code.
_LAYOUT = {
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.COMMENT,
    tokenize.ENDMARKER,
}

#: The first and last token of an f-string on Python 3.12 and later (-1 before: one STRING).
_FSTRING_START: int = getattr(tokenize, "FSTRING_START", -1)
_FSTRING_END: int = getattr(tokenize, "FSTRING_END", -1)


class ConversionError(ValueError):
    """A source the rules cannot convert; the message says where and why."""


@dataclass(frozen=True)
class Renames:
    """A job's renames, sorted by where they apply (rules 3 to 5)."""

    #: Rule 3: the tokens of each code rename's ``FROM``, and its ``TO``; the longest first.
    code: list[tuple[tuple[str, ...], str]]
    #: ``FROM`` -> ``TO`` of every rename, code and prose.
    table: dict[str, str]
    #: Rule 4: the code renames as whole words.
    in_strings: re.Pattern[str] | None
    #: Rules 4 and 5: the prose renames as written, then the code renames as whole words.
    in_docstrings: re.Pattern[str] | None

    @classmethod
    def of(cls, renames: dict[str, str]) -> Renames:
        """Sort *renames* (``FROM`` -> ``TO``): a ``FROM`` that starts with a letter or ``_`` and
        holds no space is code (``asyncio.sleep``), any other is prose (``(asyncio API)``)."""
        code: list[tuple[tuple[str, ...], str]] = []
        words: list[str] = []
        phrases: list[str] = []
        for old, new in renames.items():
            if old[:1].isidentifier() and not any(c.isspace() for c in old):
                code.append((_code_tokens(old), new))
                words.append(old)
            else:
                phrases.append(old)
        code.sort(key=lambda item: len(item[0]), reverse=True)
        as_words = [_whole_word(word) for word in sorted(words, key=len, reverse=True)]
        as_written = [re.escape(phrase) for phrase in sorted(phrases, key=len, reverse=True)]
        return cls(
            code,
            dict(renames),
            re.compile("|".join(as_words)) if as_words else None,
            re.compile("|".join(as_written + as_words)) if as_written + as_words else None,
        )

    def string(self, text: str, docstring: bool) -> str:
        """Return the string token *text* (quotes included) with rules 4 and 5 applied."""
        pattern = self.in_docstrings if docstring else self.in_strings
        if pattern is None:
            return text
        return pattern.sub(lambda match: self.table[match.group(0)], text)


def _whole_word(word: str) -> str:
    """Return a pattern matching *word* with no letter, digit or ``_`` either side of it."""
    after = r"(?!\w)" if re.match(r"\w", word[-1]) else ""
    return rf"(?<!\w){re.escape(word)}{after}"


def _code_tokens(text: str) -> tuple[str, ...]:
    """Return the strings of the code tokens of *text*, a fragment such as ``a.b[c]``."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return tuple(token.string for token in tokens if token.type not in _LAYOUT)


@dataclass(frozen=True)
class _Edit:
    """Replace the characters ``start:end`` of a text with *text*."""

    start: int
    end: int
    text: str


class _Source:
    """A text, its tokens, and the character offset of a token's (row, column)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = io.StringIO(text).readlines()  # the lines tokenize reads
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))
        try:
            self.tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
            self.tree = ast.parse(text)
        except (tokenize.TokenError, SyntaxError) as exc:
            raise ConversionError(f"cannot read the source: {exc}") from exc

    def offset(self, position: tuple[int, int]) -> int:
        row, column = position
        return self.starts[row - 1] + column

    def replace(self, start: tuple[int, int], end: tuple[int, int], text: str) -> _Edit:
        """Return the edit replacing the characters from *start* to *end* with *text*."""
        return _Edit(self.offset(start), self.offset(end), text)

    def edited(self, edits: Sequence[_Edit]) -> str:
        """Return the text with *edits* (which must not overlap) made."""
        parts: list[str] = []
        done = 0
        for edit in sorted(edits, key=lambda e: e.start):
            if edit.start < done:
                raise ConversionError(f"two changes overlap at character {edit.start}")
            parts += [self.text[done : edit.start], edit.text]
            done = edit.end
        parts.append(self.text[done:])
        return "".join(parts)

    def docstrings(self) -> set[int]:
        """Return the indexes in :attr:`tokens` of the string tokens of every docstring (of the
        module, a class or a function; several tokens when implicitly concatenated)."""
        starts: set[tuple[int, int]] = set()
        for node in ast.walk(self.tree):
            if not isinstance(
                node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
            ):
                continue
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                value = first.value
                # The syntax tree counts columns in UTF-8 bytes, tokenize in characters.
                line = self.lines[value.lineno - 1].encode()
                starts.add((value.lineno, len(line[: value.col_offset].decode())))
        found: set[int] = set()
        for index, token in enumerate(self.tokens):
            if token.type != tokenize.STRING or token.start not in starts:
                continue
            found.add(index)
            following = index + 1
            while self.tokens[following].type in (tokenize.STRING, tokenize.NL):
                if self.tokens[following].type == tokenize.STRING:
                    found.add(following)
                following += 1
        return found


def _docstring_markers(text: str) -> str:
    """Rule 1 on the lines of a docstring token."""
    lines: list[str] = []
    for line in io.StringIO(text).readlines():
        body = line.rstrip("\r\n")
        if body.rstrip().endswith(_ASYNC_ONLY):
            continue
        stripped = body.lstrip()
        if stripped.startswith(_SYNC):
            line = body[: len(body) - len(stripped)] + stripped[len(_SYNC) :] + line[len(body) :]
        lines.append(line)
    return "".join(lines)


def _has_marker(text: str) -> bool:
    """Tell whether *text* has a line that rule 1 would change."""
    return _docstring_markers(text) != text


def apply_markers(text: str) -> str:
    """Rule 1: drop the ``# async-only`` lines and turn ``# sync: CODE`` lines into code, in
    the code and in docstrings."""
    source = _Source(text)
    first_on_row: dict[int, int] = {}
    continued: set[int] = set()  # the rows that a token begun on an earlier row runs onto
    for index, token in enumerate(source.tokens):
        first_on_row.setdefault(token.start[0], index)
        continued.update(range(token.start[0] + 1, token.end[0] + 1))
    docstrings = source.docstrings()
    edits: list[_Edit] = []
    for index, token in enumerate(source.tokens):
        row = token.start[0]
        if index in docstrings:
            marked = _docstring_markers(token.string)
            if marked != token.string:
                edits.append(source.replace(token.start, token.end, marked))
        elif token.type == tokenize.STRING and _has_marker(token.string):
            raise ConversionError(f"line {row}: markers work in comments and docstrings only")
        elif token.type == tokenize.COMMENT and token.string.rstrip().endswith(_ASYNC_ONLY):
            if row in continued:
                raise ConversionError(f"line {row}: an # async-only line ends a multi-line token")
            edits.append(source.replace((row, 0), (row + 1, 0), ""))
        elif (
            token.type == tokenize.COMMENT
            and token.string.startswith(_SYNC)
            and first_on_row[row] == index
        ):
            code = token.string[len(_SYNC) :].rstrip()
            edits.append(source.replace((row, token.start[1]), (row + 1, 0), code + "\n"))
    return source.edited(edits)


@dataclass(frozen=True)
class _Unit:
    """A code token, or a whole f-string (which Python 3.12 and later split into tokens)."""

    type: int
    string: str
    start: tuple[int, int]
    end: tuple[int, int]
    index: int  # of its (first) token


def _units(source: _Source) -> list[_Unit]:
    """Return the code tokens of *source*, each f-string as one STRING unit."""
    units: list[_Unit] = []
    depth = 0
    opened = 0
    for index, token in enumerate(source.tokens):
        if token.type == _FSTRING_START:
            opened = index if not depth else opened
            depth += 1
        elif token.type == _FSTRING_END:
            depth -= 1
            if not depth:
                first = source.tokens[opened]
                text = source.text[source.offset(first.start) : source.offset(token.end)]
                units.append(_Unit(tokenize.STRING, text, first.start, token.end, opened))
        elif not depth and token.type not in _LAYOUT:
            units.append(_Unit(token.type, token.string, token.start, token.end, index))
    return units


def convert_code(text: str, renames: Renames) -> str:
    """Rules 2 to 5: drop the async keywords, rename code, rename in strings and docstrings."""
    source = _Source(text)
    docstrings = source.docstrings()
    units = _units(source)
    edits: list[_Edit] = []
    position = 0
    while position < len(units):
        unit = units[position]
        after = units[position + 1] if position + 1 < len(units) else None
        position += 1
        if unit.type == tokenize.STRING:
            string = renames.string(unit.string, unit.index in docstrings)
            if string != unit.string:
                edits.append(source.replace(unit.start, unit.end, string))
            continue
        if unit.type != tokenize.NAME:
            continue
        if unit.string == "await" or (
            unit.string == "async" and after is not None and after.string in ("def", "with", "for")
        ):
            # The keyword and the spaces after it on its line.
            keep = after.start if after is not None and after.start[0] == unit.end[0] else unit.end
            edits.append(source.replace(unit.start, keep, ""))
            continue
        for tokens, new in renames.code:
            window = units[position - 1 : position - 1 + len(tokens)]
            if tuple(u.string for u in window) == tokens and all(
                u.type != tokenize.STRING for u in window
            ):
                edits.append(source.replace(window[0].start, window[-1].end, new))
                position += len(tokens) - 1
                break
    return source.edited(edits)


def _check_blocking(text: str, where: str) -> None:
    """Rule 6: fail when *text*, a converted file, does not parse or keeps asyncio syntax."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise ConversionError(f"{where}: the twin does not parse: {exc}") from exc
    for node in ast.walk(tree):
        kind = None
        if isinstance(node, (ast.Await, ast.AsyncFunctionDef, ast.AsyncWith, ast.AsyncFor)):
            kind = type(node).__name__
        elif isinstance(node, ast.comprehension) and node.is_async:
            kind = "async comprehension"
        if kind is not None:
            line = getattr(node, "lineno", "?")
            raise ConversionError(f"{where}: the twin keeps {kind} on its line {line}")


def convert(text: str, job: Job) -> str:
    """Return the blocking version of *text*, *job*'s source (before formatting)."""
    renames = Renames.of({**COMMON_NAMES, **job.names})
    try:
        converted = convert_code(apply_markers(text), renames)
    except ConversionError as exc:
        raise ConversionError(f"{job.source}: {exc}") from None
    _check_blocking(converted, job.source)
    header = (
        _HEADER_START + " from\n"
        f"#   {job.source}\n"
        "# DO NOT EDIT: change the async source and run `python tools/async_to_sync.py`.\n"
    )
    return header + converted


def _ruff(path: Path) -> None:
    ruff = shutil.which("ruff")
    if ruff is None:
        sys.exit("async_to_sync: ruff is required (pip install ruff)")
    config = ["--config", str(ROOT / "pyproject.toml")]
    subprocess.run(
        [ruff, "check", *config, "--fix-only", "--quiet", "--select", "I,F401", str(path)],
        check=False,
    )
    subprocess.run([ruff, "format", *config, "--quiet", str(path)], check=True)


def generate(job: Job) -> str:
    """Return the formatted twin of *job*'s source."""
    text = convert((ROOT / job.source).read_text(), job)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / Path(job.target).name
        path.write_text(text)
        _ruff(path)
        return path.read_text()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a twin is out of date")
    args = parser.parse_args(argv)
    stale = 0
    jobs = JOBS + _extra_jobs()
    for orphan in _orphans(jobs):
        if args.check:
            stale += 1
            print(f"{orphan.relative_to(ROOT)}: generated, but its source is gone", file=sys.stderr)
        else:
            orphan.unlink()
            print(f"removed {orphan.relative_to(ROOT)}")
    for job in jobs:
        if not (ROOT / job.source).is_file():
            print(f"async_to_sync: {job.source} does not exist (a job names it)", file=sys.stderr)
            return 2
        try:
            wanted = generate(job)
        except ConversionError as exc:
            print(f"async_to_sync: {exc}", file=sys.stderr)
            return 2
        target = ROOT / job.target
        current = target.read_text() if target.exists() else ""
        if wanted == current:
            continue
        if args.check:
            stale += 1
            sys.stderr.writelines(
                difflib.unified_diff(
                    current.splitlines(True), wanted.splitlines(True), job.target, "generated"
                )
            )
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(wanted)
            print(f"wrote {job.target}")
    if stale:
        print(
            f"{stale} generated file(s) out of date: run python tools/async_to_sync.py",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
