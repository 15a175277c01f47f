"""Input checks shared by every transport, so bad input is refused before any I/O.

Each check raises :class:`~pgque.core.errors.InvalidInput` and returns the value in its
canonical form. Transports call these first; a refused call changes nothing.

The checks live by concept in private modules: the limits (``_limits``), names and ids and
the paged listings' arguments (``_ids``), numbers and durations (``_numbers``), events and
publish batches (``_events``), leases and settlements (``_settlements``). Import them from
here. The options every transport takes are :mod:`pgque.core.transport_options`.
"""

from __future__ import annotations

from pgque.core.validation._events import (
    check_event,
    check_items,
    check_max_event_bytes,
    checked_event,
)
from pgque.core.validation._ids import (
    QUEUE_NAME_PATTERN,
    check_after_id,
    check_entry_name,
    check_group_id,
    check_group_state,
    check_groups_page,
    check_head,
    check_holder,
    check_holders,
    check_ids,
    check_limit,
    check_message_id,
    check_oldest_groups,
    check_queue_name,
    check_scheduled_page,
    check_text_id,
)
from pgque.core.validation._limits import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_EVENT_BYTES,
    MAX_ENTRY_NAME_BYTES,
    MAX_EVENT_BYTES_LIMIT,
    MAX_GROUP_ID_BYTES,
    MAX_GROUPS_PAGE,
    MAX_HOLDER_CHARS,
    MAX_PRIORITY,
    MAX_REASON_CHARS,
    MAX_VISIBILITY_S,
)
from pgque.core.validation._limits import MAX_BATCH as MAX_BATCH
from pgque.core.validation._numbers import (
    check_batch_size,
    check_claim_count,
    check_delay,
    check_priority,
    check_seconds,
    check_tick,
)
from pgque.core.validation._settlements import (
    CheckedSettlement,
    check_backend,
    check_error,
    check_lease,
    check_reason,
    check_settlements,
    check_store,
    exhausted_reason,
)

__all__ = [
    "check_backend",
    "check_store",
    "MAX_GROUP_ID_BYTES",
    "MAX_REASON_CHARS",
    "MAX_PRIORITY",
    "MAX_VISIBILITY_S",
    "DEFAULT_MAX_EVENT_BYTES",
    "MAX_EVENT_BYTES_LIMIT",
    "check_text_id",
    "check_group_id",
    "check_priority",
    "check_seconds",
    "check_delay",
    "check_entry_name",
    "check_tick",
    "check_message_id",
    "check_head",
    "check_scheduled_page",
    "MAX_ENTRY_NAME_BYTES",
    "check_batch_size",
    "check_claim_count",
    "check_holders",
    "check_settlements",
    "CheckedSettlement",
    "check_event",
    "checked_event",
    "check_max_event_bytes",
    "check_items",
    "check_lease",
    "check_queue_name",
    "QUEUE_NAME_PATTERN",
    "check_reason",
    "check_limit",
    "check_ids",
    "MAX_HOLDER_CHARS",
    "MAX_GROUPS_PAGE",
    "DEFAULT_MAX_ATTEMPTS",
    "check_holder",
    "check_group_state",
    "check_groups_page",
    "check_oldest_groups",
    "check_after_id",
    "check_error",
    "exhausted_reason",
]
