"""The bounds of the bulk actions on the in-memory transport: a key filter examines at most
``SCAN_ITEMS`` groups per call and says where to go on; a list pages by ``after`` too."""

from __future__ import annotations

from pgque.core import Event, InMemoryTransport
from pgque.core.bulk import SCAN_ITEMS


def test_a_key_filter_examines_at_most_scan_items_groups_per_call() -> None:
    with InMemoryTransport() as t:
        names = [f"a{i:05d}" for i in range(SCAN_ITEMS + 5)]
        for start in range(0, len(names), 5000):
            t.publish_many([(g, Event(kind="k")) for g in names[start : start + 5000]])
        t.publish("b", Event(kind="k"), fairness_key="acme")
        first = t.bulk_pause(key="acme")
        assert (first.matched, first.changed) == (0, 0)
        assert first.next_after == f"a{SCAN_ITEMS - 1:05d}"  # stopped at its bound
        rest = t.bulk_pause(key="acme", after=first.next_after)
        assert (rest.matched, rest.changed, rest.ids, rest.next_after) == (1, 1, ["b"], None)


def test_a_list_pages_by_after_like_a_filter() -> None:
    with InMemoryTransport() as t:
        t.publish_many([(g, Event(kind="k")) for g in ("a", "b", "c")])
        result = t.bulk_pause(group_ids=["c", "a", "b"], after="a")
        assert result.ids == ["b", "c"]
        assert t.bulk_resume(state="paused").changed == 2
        for _ in range(3):
            lease = t.claim()
            assert lease is not None
            assert t.dead_letter(lease, "bad")
        ids = [d.id for d in t.dead_letters()]
        assert len(ids) == 3
        listed = t.bulk_delete_dead_letters(ids=ids, after=ids[0], dry_run=True)
        assert listed.ids == ids[1:]
