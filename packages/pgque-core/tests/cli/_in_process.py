"""The command line run in this process, on a named in-memory store: the ``cli``, ``url`` and
``queue`` fixtures of conftest.py and the :class:`Result` each run returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Cli", "Result"]


@dataclass(frozen=True)
class Result:
    """What one command run did: its exit status and what it printed."""

    code: int
    out: str
    err: str

    @property
    def last_line(self) -> str:
        return self.out.rstrip("\n").splitlines()[-1]

    def error_line(self) -> str:
        assert self.code != 0, self
        lines = self.err.strip().splitlines()
        assert len(lines) == 1, self.err
        assert lines[0].startswith("pgque: error: "), self.err
        return lines[0]


#: ``cli(*args)``: run ``pgque *args --url URL`` in this process.
Cli = Callable[..., Result]
