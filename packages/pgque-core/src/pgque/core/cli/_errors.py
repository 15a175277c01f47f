"""How a ``pgque`` command fails: :class:`CliError` (one line on stderr), its exit statuses,
and :func:`one_line` for the driver messages it carries."""

from __future__ import annotations

import re

__all__ = ["CliError", "one_line", "MISSING_PACKAGE_EXIT"]

#: The exit status of a command (or an option) whose distribution is not installed: a usage
#: error, as for a command that does not exist.
MISSING_PACKAGE_EXIT = 2


class CliError(Exception):
    """A command failed in a way the user can act on; ``main`` prints it on one line."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


_WHITESPACE = re.compile(r"\s+")


def one_line(text: str) -> str:
    """Collapse *text* onto one line (driver messages often span several)."""
    return _WHITESPACE.sub(" ", text).strip()
