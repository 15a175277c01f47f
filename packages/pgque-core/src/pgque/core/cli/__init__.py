"""The ``pgque`` command line: run workers, publish, inspect and repair queues, run the demo.

Installed with the ``cli`` extra (``pip install 'pgque-core[cli]'``), which brings click and
rich. This module imports without them so that ``pgque`` can say what is missing in one line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

__all__ = ["main", "INSTALL_HINT"]

from pgque.core.hints import install_hint

#: What to tell a user whose environment lacks the command line's dependencies.
INSTALL_HINT = install_hint("pgque-core[cli]")


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``pgque`` command with *argv* (default: ``sys.argv[1:]``) and exit.

    Exits 2 with one line naming the extra to install when click or rich is missing.
    """
    try:
        import click  # noqa: F401
        import rich  # noqa: F401
    except ImportError as exc:
        sys.stderr.write(
            f"pgque: error: the command line needs {exc.name or 'click and rich'}; "
            f"run: {INSTALL_HINT}\n"
        )
        sys.exit(2)
    from pgque.core.cli._app import run

    status = run(list(argv) if argv is not None else None)
    if status == 130:
        # Interrupted: everything this command opened was closed on the way out, but a thread
        # of a library may still sit in native code; finalizing the interpreter under it can
        # abort the process (SIGABRT, "exception not rethrown") instead of exiting 130.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)
