"""What a ``pgque`` command contributed by another distribution builds on.

A distribution adds commands to ``pgque`` through the entry-point group ``pgque.cli_commands``:
each entry is named after its command and its value is a callable, taking no argument, that
returns the :class:`click.Command` (so that the entry point loads without click)::

    [project.entry-points."pgque.cli_commands"]
    install = "pgque.postgres._cli:install_command"

``pgque`` loads a contributed command only when it is run or listed (``pgque --help``). The
command runs inside the command line's one error boundary: raise :class:`CliError` for a
failure the user can act on (one line on stderr, exit 1 or its ``exit_code``); a PgqueError is
printed the same way. A command of ``pgque-core`` itself keeps its name when another
distribution registers the same one.

This module needs click (``pgque-core[cli]``).
"""

from __future__ import annotations

from pgque.core.cli._common import (
    CliError,
    Config,
    common_options,
    current_connect_timeout,
    one_line,
    resolve_config,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "CliError",
    "Config",
    "common_options",
    "resolve_config",
    "current_connect_timeout",
    "one_line",
]

#: The entry-point group of contributed commands: name = the command, value = its factory.
ENTRY_POINT_GROUP = "pgque.cli_commands"
