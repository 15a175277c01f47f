"""A starting worker's wait for its server: up to ``--connect-timeout``, then one line.

The same on every backend, whatever the failure: nothing listens (refused), the server
answers "starting up", or it does not answer at all (the wait runs in a thread of its own, so
a connection attempt that hangs cannot outlast the timeout).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from pgque.core.cli._config import Config
from pgque.core.cli._connecting import quick_options
from pgque.core.cli._errors import CliError, one_line
from pgque.core.cli._flags import current_connect_timeout
from pgque.core.errors import ConnectionLost
from pgque.core.registry import backends, connect
from pgque.core.urls import parse_url

__all__ = ["wait_until_reachable", "unreachable_reason"]

#: The pause between two probes of a server that refused (or dropped) the connection.
PROBE_PAUSE_S = 0.25
#: How much longer than the timeout the wait may take: loading the driver, and the last
#: attempt's own end (each backend stops retrying at the timeout by itself).
SLACK_S = 1.0


def unreachable_reason(error: BaseException | None) -> str:
    """Return why the server could not be reached, in a few words (for the one-line error)."""
    if error is None:
        return "timed out"
    text = str(error)
    lower = text.lower()
    if "refused" in lower:
        return "connection refused"
    if "timed out" in lower or "timeout" in lower:
        return "timed out"
    if "no such file or directory" in lower:
        return "no such socket"
    return one_line(text)


def wait_until_reachable(config: Config, timeout: float | None = None) -> None:
    """Return once *config*'s server answers, waiting up to *timeout* seconds
    (``--connect-timeout`` by default).

    The worker then opens its own transport (blocking or asyncio). Raises CliError (one line:
    the masked URL, the timeout and the reason) when the server cannot be reached in time,
    and what opening a transport raises for anything else (a bad password, a missing schema).
    """
    wait = current_connect_timeout() if timeout is None else timeout
    # Loading the backend (its client library's imports) is not waiting for the server: it is
    # done before the clock starts, so a slow start on a busy machine cannot use up the wait
    # before the first attempt has even been made.
    backends(parse_url(config.url).scheme)
    outcome: dict[str, Any] = {}
    stop = threading.Event()

    def probe() -> None:
        try:
            _probe(config, wait, stop, outcome)
            outcome["answered"] = True
        except BaseException as exc:  # handed to the command's thread
            outcome["error"] = exc

    thread = threading.Thread(target=probe, name="pgque-connect", daemon=True)
    thread.start()
    thread.join(wait + SLACK_S)
    if thread.is_alive():  # an attempt hangs: give it up (the thread is a daemon)
        stop.set()
    elif outcome.get("answered"):
        return
    error = outcome.get("error")
    if error is None or isinstance(error, ConnectionLost):
        cause = outcome.get("last") if error is None else error
        raise CliError(
            f"cannot reach {config.masked_url} within {wait:g} s: {unreachable_reason(cause)}"
        ) from cause
    raise error


def _probe(config: Config, wait: float, stop: threading.Event, seen: dict[str, Any]) -> None:
    """Probe the server until it answers or *wait* ends.

    Each probe is a one-shot transport (a refused connection fails at once, a server still
    starting is waited for up to what is left of *wait*) making one cheap call (``stats``);
    each failure is noted in ``seen["last"]`` (the reason given if the wait is given up).
    """
    deadline = time.monotonic() + wait
    while True:
        left = max(deadline - time.monotonic(), PROBE_PAUSE_S)
        try:
            quick = quick_options(config.url, config.options, one_shot=True, timeout=left)
            with connect(config.url, **quick) as probe:
                probe.stats()
            return
        except ConnectionLost as exc:
            seen["last"] = exc
            if stop.is_set() or time.monotonic() + PROBE_PAUSE_S >= deadline:
                raise
        stop.wait(PROBE_PAUSE_S)
