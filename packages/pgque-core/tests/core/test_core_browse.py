"""The pure part of browse and search (pgque.core.browse): a prefix's range, the paging rule
and the preview, which every backend must reproduce."""

from __future__ import annotations

import pytest

from pgque.core import Event, InvalidInput
from pgque.core.browse import (
    PREVIEW_CHARS,
    UNDECODABLE_KIND,
    check_group_prefix,
    check_messages_query,
    data_preview,
    message_rows_page,
    page_of,
    prefix_end,
)

IDS = ["", "a", "ab", "ab\U0010ffff", "abc", "ab\ud7ff", "ab\ue000", "ac", "b", "é", "\U0010ffff"]


@pytest.mark.parametrize("prefix", ["a", "ab", "ab\ud7ff", "ab\U0010ffff", "é", "\U0010ffff"])
def test_the_prefix_range_holds_exactly_the_ids_that_start_with_it(prefix: str) -> None:
    end = prefix_end(prefix)
    for text in IDS:
        inside = prefix <= text and (end is None or text < end)
        assert inside == text.startswith(prefix), (prefix, text, end)
    if end is not None:
        assert end.encode("utf-8") > prefix.encode("utf-8")


def test_prefix_end_skips_surrogates_and_drops_the_last_code_point() -> None:
    assert prefix_end("a\ud7ff") == "a\ue000"
    assert prefix_end("a\U0010ffff") == "b"
    assert prefix_end("\U0010ffff\U0010ffff") is None


def test_the_paging_rule() -> None:
    rows = [(n, n) for n in range(1, 11)]
    assert page_of(rows, lambda n: True, 3) == ([1, 2, 3], 3)
    assert page_of(rows, lambda n: True, 10) == (list(range(1, 11)), None)
    assert page_of(rows, lambda n: n == 9, 3, budget=5) == ([], 5)
    assert page_of(rows, lambda n: n % 2 == 0, 2) == ([2, 4], 4)
    assert page_of([], lambda n: True, 3) == ([], None)


def test_a_preview_is_the_stored_data_text_cut() -> None:
    event = Event(kind="k", data={"s": "x" * 500, "é": [1, 2.5, None]})
    event_id, kind, preview, truncated = data_preview(event.to_json())
    assert (event_id, kind, truncated) == (event.id, "k", True)
    assert len(preview) == PREVIEW_CHARS
    assert preview.startswith('{"s":"xxx')
    assert data_preview(Event(kind="k", data="hi").to_json())[2:] == ('"hi"', False)
    assert data_preview("not json")[1:] == (UNDECODABLE_KIND, "not json", False)


def test_a_listings_last_row_carries_next_after() -> None:
    row = (7, "g", "e", "k", 1.0, True, 0, 10, "{}", False, 7)
    page = message_rows_page([row, (None,) * 10 + (42,)])
    assert [m.message_id for m in page.items] == [7]
    assert page.next_after == 42
    assert message_rows_page([row]).next_after is None


def test_checks() -> None:
    assert check_group_prefix("") is None
    assert check_group_prefix(None) is None
    with pytest.raises(InvalidInput):
        check_group_prefix(3)
    query = check_messages_query(group_id="g", kind="k", limit=5, after=-1)
    assert (query.group_id, query.kind, query.limit, query.after) == ("g", "k", 5, -1)
    with pytest.raises(InvalidInput):
        check_messages_query(group_id=None, kind="x" * 257, limit=5, after=None)
