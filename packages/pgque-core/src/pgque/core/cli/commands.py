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

Beside the options every command takes (:func:`common_options`), a command may take
``--connect-timeout`` alone (:func:`connect_timeout_option`), open its transports with the
connect behaviour of a one-off command (:func:`quick_options`), load a ``MODULE:SCHEDULE`` as
``pgque schedules`` does (:func:`load_schedule`) and honour ``PGQUE_DEBUG``
(:func:`debug_requested`). ``pgque worker --prometheus-port`` finds its exporter through
:data:`WORKER_EXPORTERS_GROUP` the same way.

This module needs click (``pgque-core[cli]``).
"""

from __future__ import annotations

from pgque.core.cli._config import Config, resolve_config
from pgque.core.cli._connecting import quick_options
from pgque.core.cli._errors import CliError, one_line
from pgque.core.cli._flags import common_options, connect_timeout_option, current_connect_timeout
from pgque.core.cli._schedule_cmd import load_schedule
from pgque.core.cli._worker_cmd import debug_requested
from pgque.core.cli._worker_run import WORKER_EXPORTERS_GROUP

__all__ = [
    "ENTRY_POINT_GROUP",
    "WORKER_EXPORTERS_GROUP",
    "CliError",
    "Config",
    "common_options",
    "connect_timeout_option",
    "resolve_config",
    "quick_options",
    "current_connect_timeout",
    "one_line",
    "load_schedule",
    "debug_requested",
]

#: The entry-point group of contributed commands: name = the command, value = its factory.
ENTRY_POINT_GROUP = "pgque.cli_commands"
