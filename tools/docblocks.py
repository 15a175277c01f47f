"""Read the code blocks of README.md and docs/*.md, with what each says about how to run it.

A block may be preceded (blank lines allowed) by one HTML comment, invisible on the site::

    <!-- docs-run: postgres -->

whose words say how the docs-run session (and, for ``install``, the build session) runs it:

- ``memory`` (the default of python and console blocks), ``postgres``, ``redis``: run it
  against that backend; several of them run it on each (``memory://`` and ``memory://NAME``
  in the block become the server's URL). A python block runs in a fresh interpreter; a
  console block runs its ``$ command`` lines in one shell. The documented URLs
  ``postgresql://localhost/app`` and ``redis://localhost:6379/0`` become the test servers'.
- ``pgbouncer``: like ``postgres``, with a real PgBouncer (transaction pooling) started in
  front of the test server: ``postgresql://localhost:6432/app`` in the block becomes its URL
  and ``postgresql://localhost/app`` the server's own.
- ``redis-cluster``: against a real six-node Redis Cluster started for the run
  (pgque.conformance.servers.redis_cluster; needs redis-server and redis-cli):
  ``redis+cluster://localhost:7000,localhost:7001,localhost:7002/`` in the block becomes its
  URL and ``redis://localhost:7000`` the URL of one of its nodes.
- ``install BACKEND``: a ``$ pip install ...`` block of docs/installation.md; the build
  session runs it in a fresh environment and then publishes, claims and acks through BACKEND.
- ``nox``: a command that runs nox itself (the test command, the build); run by CI, not from
  inside a nox session.
- ``signature``: a python block of call signatures (``name(arg, *, opt=1) -> T``, one a
  line) or class headings; each is checked against the real object of pgque.core (or the
  ``Transport`` protocol) by name and parameters.
- ``file PATH``: a module the page's other blocks use (``myapp/tasks.py``); it is compiled, and
  written to PATH in the folder of every block of its page that runs.
- ``fragment``: not runnable on its own (an excerpt); kept rare.
- ``pytest`` after a backend: a python block of test functions, run by pytest (which must
  collect and pass at least one).
- ``exits N`` after a backend: a console block whose last command exits with status N.

Blocks in other languages (text, toml, sql, yaml, output) are shown, never run.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Block", "BACKENDS", "RUN_LANGUAGES", "blocks", "doc_files", "commands"]

ROOT = Path(__file__).resolve().parent.parent

#: The languages whose blocks are run.
RUN_LANGUAGES = frozenset({"python", "console"})

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,})(?P<lang>[\w+-]*)[^\n]*$")
_MARK = re.compile(r"^\s*<!--\s*docs-run:\s*(?P<words>[^>]*?)\s*-->\s*$")
#: The backends a runnable block may name.
BACKENDS = frozenset({"memory", "postgres", "redis", "pgbouncer", "redis-cluster"})
_KINDS = {*BACKENDS, "install", "nox", "fragment", "signature", "file"}


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language, its code and its marker words."""

    path: Path
    line: int
    language: str
    code: str
    words: tuple[str, ...]

    @property
    def kind(self) -> str:
        """How the block runs: memory, postgres, redis, install, nox or fragment."""
        return self.words[0] if self.words else "memory"

    @property
    def backends(self) -> tuple[str, ...]:
        """The backends a runnable block runs on: ``memory postgres redis`` runs it on three
        (``memory://`` and ``memory://NAME`` in it become the server's URL)."""
        chosen = tuple(w for w in self.words if w in BACKENDS)
        return chosen or (("memory",) if not self.words else ())

    @property
    def runs(self) -> bool:
        """True for a python or console block that the docs-run session executes."""
        return self.language in RUN_LANGUAGES and self.kind in BACKENDS

    @property
    def expected_exit(self) -> int:
        """The status the last command of a console block exits with (``exits N``)."""
        if "exits" in self.words:
            return int(self.words[self.words.index("exits") + 1])
        return 0

    @property
    def where(self) -> str:
        """``docs/page.md:LINE``, for test ids and failure messages."""
        try:
            return f"{self.path.relative_to(ROOT)}:{self.line}"
        except ValueError:
            return f"{self.path}:{self.line}"


def doc_files(root: Path = ROOT) -> list[Path]:
    """Return README.md and every page under docs/, in a stable order."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """Return the fenced code blocks of the markdown file *path*.

    Raises ValueError for an unclosed fence or an unknown marker word.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    words: tuple[str, ...] = ()
    index = 0
    while index < len(lines):
        line = lines[index]
        mark = _MARK.match(line)
        if mark:
            words = tuple(mark.group("words").split())
            if not words or words[0] not in _KINDS:
                raise ValueError(f"{path}:{index + 1}: unknown docs-run marker {line.strip()!r}")
            index += 1
            continue
        fence = _FENCE.match(line)
        if not fence:
            if line.strip():
                words = ()  # a marker belongs to the very next block only
            index += 1
            continue
        start = index
        closing = fence.group("indent") + fence.group("fence")
        body: list[str] = []
        index += 1
        while index < len(lines) and lines[index].rstrip() != closing:
            body.append(lines[index][len(fence.group("indent")) :])
            index += 1
        if index == len(lines):
            raise ValueError(f"{path}:{start + 1}: unclosed code fence")
        found.append(Block(path, start + 1, fence.group("lang"), "\n".join(body) + "\n", words))
        words = ()
        index += 1
    return found


def _complete(command: str) -> bool:
    """Tell whether *command* closes every quote it opens (shell rules)."""
    try:
        shlex.split(command, comments=True)
    except ValueError:
        return False
    return True


def commands(block: Block) -> list[str]:
    """Return the ``$ command`` lines of a console block (a trailing ``\\`` joins lines).

    Raises ValueError for a console block without any command.
    """
    found: list[str] = []
    lines = block.code.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.startswith("$ "):
            continue  # output shown in the docs
        command = line[2:]
        while index < len(lines) and (command.endswith("\\") or not _complete(command)):
            if command.endswith("\\"):
                command = command[:-1] + " " + lines[index].strip()
            else:  # inside a quoted argument that spans lines (python -c '...')
                command += "\n" + lines[index]
            index += 1
        found.append(command)
    if not found:
        raise ValueError(f"{block.where}: a console block without a `$ ` command line")
    return found
