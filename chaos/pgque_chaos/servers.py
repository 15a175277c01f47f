"""Throwaway PostgreSQL and Redis servers that the harness may restart, kill and cut.

They live in pgque-conformance (``pgque.conformance.servers.restartable``), where the outage
tests of the worker use them too; this module keeps the harness's names.
"""

from __future__ import annotations

import sys

from pgque.conformance.servers.restartable import (
    OUTAGE_S,
    ThrowawayPostgres,
    ThrowawayRedis,
    free_port,
)

__all__ = ["ThrowawayPostgres", "ThrowawayRedis", "free_port", "OUTAGE_S"]


if __name__ == "__main__":  # a quick manual check: python -m pgque_chaos.servers
    for server in (ThrowawayPostgres(), ThrowawayRedis()):
        try:
            print(server.start(), file=sys.stderr)
            server.restart()
            print("restarted", file=sys.stderr)
        finally:
            server.stop()
