"""The commands other distributions contribute to ``pgque`` (``pgque.cli_commands``).

:class:`PgqueGroup` is the ``pgque`` click group: its own commands first, then the contributed
ones, each loaded only when it is run or listed. A contributed command that fails to load is
still listed, and running it says why in one line. A command pgque knows another distribution
provides (:data:`KNOWN_COMMANDS`) says which one to install while it is missing, and exits
:data:`MISSING_PACKAGE_EXIT` (2, a usage error: the command is not there to run).
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any

import click

from pgque.core.cli._errors import MISSING_PACKAGE_EXIT, CliError, one_line
from pgque.core.cli.commands import ENTRY_POINT_GROUP
from pgque.core.hints import install_hint

__all__ = ["PgqueGroup", "KNOWN_COMMANDS"]

#: Commands another distribution contributes -> that distribution (for the install hint).
KNOWN_COMMANDS: dict[str, str] = {
    "install": "pgque-postgres",
    "migrate": "pgque-postgres",
    "dashboard": "pgque-dashboard",
    "metrics": "pgque-dashboard",
}

#: Accept any arguments: a stand-in command only reports why the real one is not there.
_ANY_ARGS = {"ignore_unknown_options": True, "allow_extra_args": True}


def _entries(name: str | None = None) -> list[EntryPoint]:
    found = entry_points(group=ENTRY_POINT_GROUP)
    return [ep for ep in found if name is None or ep.name == name]


def _stand_in(name: str, summary: str, message: str, exit_code: int = 1) -> click.Command:
    """Return a command listed as *summary* whose every run fails with *message*."""

    def fail() -> None:
        raise CliError(message, exit_code)

    return click.Command(
        name,
        callback=fail,
        help=f"{summary}.\n\n{message}",
        short_help=summary,
        context_settings=_ANY_ARGS,
        add_help_option=False,
    )


def _load(name: str, entries: list[EntryPoint]) -> click.Command:
    if len(entries) > 1:
        values = ", ".join(sorted(ep.value for ep in entries))
        return _stand_in(
            name, "Unavailable (registered twice)", f"pgque {name} is registered twice: {values}"
        )
    (ep,) = entries
    try:
        command = ep.load()()
    except Exception as exc:
        detail = one_line(f"{type(exc).__name__}: {exc}")
        return _stand_in(
            name,
            "Unavailable (failed to load)",
            f"pgque {name} ({ep.value}) failed to load: {detail}",
        )
    if not isinstance(command, click.Command):
        return _stand_in(
            name,
            "Unavailable (not a command)",
            f"pgque {name} ({ep.value}) did not give a click command",
        )
    return command


class PgqueGroup(click.Group):
    """The ``pgque`` group: built-in commands, then those of ``pgque.cli_commands``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._contributed: dict[str, click.Command] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = set(super().list_commands(ctx))
        names.update(ep.name for ep in _entries())
        names.update(KNOWN_COMMANDS)
        return sorted(names)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        if cmd_name not in self._contributed:
            entries = _entries(cmd_name)
            if entries:
                self._contributed[cmd_name] = _load(cmd_name, entries)
            elif cmd_name in KNOWN_COMMANDS:
                package = KNOWN_COMMANDS[cmd_name]
                return _stand_in(
                    cmd_name,
                    f"Needs {package} (not installed)",
                    f"pgque {cmd_name} comes with {package}, which is not installed; "
                    f"run: {install_hint(package)}",
                    MISSING_PACKAGE_EXIT,
                )
            else:
                return None
        return self._contributed[cmd_name]
