"""The asyncio conformance suite: every behaviour of the contract, as pytest tests.

Enable it in a backend's test module with ``from pgque.conformance.suite_async import *`` and an
``async_transport_factory`` fixture in its ``conftest.py`` (see the package README). Tests are
gated on the transport's declared :class:`~pgque.core.Capabilities`, never on backend names.

The tests live in one module per concern (``publish``, ``claim``, ``parking``, ``priorities``,
``batches``, ``attempts``, ``dead_letters``, ``invalid_input``, ``stats``, ``counters``,
``concurrency``, ``events``, ``fairness``, ``groups``, ``browse``, ``bulk``, ``history``,
``pause``, ``release``, ``errors``, ``redrive_in_place``, ``settle_and_claim``, ``settle_in``,
``scheduling``, ``workers``, ``model_agreement``); this module is the one entry point that
gathers them.
"""

# The source of its blocking twin, suite_sync (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import pytest  # async-only

from pgque.conformance.suite_async.attempts import *  # noqa: F403
from pgque.conformance.suite_async.batches import *  # noqa: F403
from pgque.conformance.suite_async.browse import *  # noqa: F403
from pgque.conformance.suite_async.bulk import *  # noqa: F403
from pgque.conformance.suite_async.claim import *  # noqa: F403
from pgque.conformance.suite_async.concurrency import *  # noqa: F403
from pgque.conformance.suite_async.counters import *  # noqa: F403
from pgque.conformance.suite_async.dead_letters import *  # noqa: F403
from pgque.conformance.suite_async.errors import *  # noqa: F403
from pgque.conformance.suite_async.events import *  # noqa: F403
from pgque.conformance.suite_async.fairness import *  # noqa: F403
from pgque.conformance.suite_async.fixtures import (
    atransport,
    harness,
    pgque_conformance_known_gaps,
)
from pgque.conformance.suite_async.groups import *  # noqa: F403
from pgque.conformance.suite_async.history import *  # noqa: F403
from pgque.conformance.suite_async.invalid_input import *  # noqa: F403
from pgque.conformance.suite_async.model_agreement import *  # noqa: F403
from pgque.conformance.suite_async.operator_retries import *  # noqa: F403
from pgque.conformance.suite_async.parking import *  # noqa: F403
from pgque.conformance.suite_async.pause import *  # noqa: F403
from pgque.conformance.suite_async.priorities import *  # noqa: F403
from pgque.conformance.suite_async.publish import *  # noqa: F403
from pgque.conformance.suite_async.redrive_in_place import *  # noqa: F403
from pgque.conformance.suite_async.release import *  # noqa: F403
from pgque.conformance.suite_async.scheduling import *  # noqa: F403
from pgque.conformance.suite_async.settle_and_claim import *  # noqa: F403
from pgque.conformance.suite_async.settle_in import *  # noqa: F403
from pgque.conformance.suite_async.shape import *  # noqa: F403
from pgque.conformance.suite_async.stats import *  # noqa: F403
from pgque.conformance.suite_async.workers import *  # noqa: F403

# Every test of the suite is a coroutine: one mark for all of them. The star import carries it
# into the backend's test module, where pytest applies it to each test collected there.
pytestmark = pytest.mark.asyncio  # async-only

# Computed, so a new test cannot be left out of ``import *``.
__all__ = [
    "pytestmark",  # async-only
    "harness",
    "atransport",
    "pgque_conformance_known_gaps",
    *sorted(name for name in dict(globals()) if name.startswith("test_")),
]
