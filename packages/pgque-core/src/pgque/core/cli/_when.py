"""The times of ``pgque publish --delay/--at``: a duration, an ISO 8601 time with a zone."""

from __future__ import annotations

import math
import re
import time
from datetime import datetime, timezone

import click

from pgque.core.cli._conflicts import retrying
from pgque.core.cli._errors import CliError
from pgque.core.contract import SupportsServerTime, Transport
from pgque.core.validation import MAX_VISIBILITY_S

__all__ = ["parse_delay", "parse_at", "delay_until"]

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DELAY = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")


def parse_delay(text: str) -> float:
    """Return ``--delay`` *text* in seconds: ``30s``, ``5m``, ``2h``, ``1d`` or plain seconds.

    The number may have a decimal part (``1.5h``); the unit is case-insensitive. Raises
    click.BadParameter (a usage error) for anything else, for 0, and past one year.
    """
    match = _DELAY.fullmatch(text.strip().lower())
    if match is None:
        raise click.BadParameter(
            f"{text!r} is not a delay: a number of seconds, or with a unit: 30s, 5m, 2h, 1d"
        )
    seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if not 0 < seconds <= MAX_VISIBILITY_S or not math.isfinite(seconds):
        raise click.BadParameter(f"{text!r} must be more than 0 and at most a year")
    return seconds


def parse_at(text: str) -> datetime:
    """Return ``--at`` *text*, ISO 8601 with a zone (``2026-12-24T09:00Z``, ``...+01:00``).

    Raises click.BadParameter (a usage error) for another form or a time without a zone.
    """
    value = text.strip()
    if value[-1:] in {"Z", "z"}:
        value = value[:-1] + "+00:00"  # Python 3.10's fromisoformat has no "Z"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise click.BadParameter(
            f"{text!r} is not an ISO 8601 time (e.g. 2026-12-24T09:00Z)"
        ) from exc
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise click.BadParameter(
            f"{text!r} has no zone: add one (2026-12-24T09:00Z for UTC, or +01:00)"
        )
    return moment


def delay_until(transport: Transport, moment: datetime) -> float:
    """Return the delay that makes a message due at *moment*, by the store's clock.

    The transport's ``server_time()`` when it has it (PostgreSQL, Redis, memory), else this
    machine's clock. Raises CliError (exit 2) when *moment* is not in the future or more
    than a year ahead.
    """
    now = (
        retrying(transport.server_time, "server_time")
        if isinstance(transport, SupportsServerTime)
        else time.time()
    )
    delay = moment.timestamp() - now
    if delay <= 0:
        raise CliError(
            f"--at {moment.isoformat()} is not in the future (the server's clock says "
            f"{datetime.fromtimestamp(now, timezone.utc).isoformat()})",
            2,
        )
    if delay > MAX_VISIBILITY_S:
        raise CliError(f"--at {moment.isoformat()} is more than a year ahead", 2)
    return delay
