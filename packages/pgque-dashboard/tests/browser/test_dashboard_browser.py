"""The dashboard in a real headless Chromium, over PostgreSQL and Redis.

Each test drives the pages as an operator would (clicks, the confirmation dialog, the live
counts) and checks the outcome through the transport, not through the page.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from urllib.parse import quote

import pytest
from _browser_helpers import Served, shoot
from playwright.sync_api import Page, expect

from pgque.conformance.hostile_async import HOSTILE_GROUP_IDS, HOSTILE_MARKUP
from pgque.core import ErrorInfo, Event, SupportsHistory, SupportsWorkers, Worker


def _error(kind: str, message: str, module: str, function: str) -> ErrorInfo:
    """A handler's failure as a worker records it (the screenshots show its traceback)."""
    trace = (
        "Traceback (most recent call last):\n"
        f'  File "app/{module}", line 42, in {function}\n'
        f"    raise {kind}({message!r})\n"
        f"{kind}: {message}\n"
    )
    return ErrorInfo(type=kind, message=message, traceback=trace, at=time.time())


def _block(served: Served, group: str) -> int:
    """Publish one message to *group* and fail it until the group is blocked; return its id."""
    with served.transport(max_attempts=1, on_exhausted="block") as t:
        head = t.publish(group, Event(kind="charge", data={"amount": 42}))
        lease = t.claim(holder="billing-1:4242:0")
        assert lease is not None
        assert lease.group_id == group
        t.nack(
            lease, error=_error("ValueError", "card declined by the bank", "billing.py", "charge")
        )
        assert t.claim() is None  # the exhausted head blocks its group
        info = t.group(group)
        assert info is not None
        assert info.state == "blocked"
    return head


def test_queues_page_shows_counts_falling_while_a_real_worker_drains(
    served: Served, page: Page
) -> None:
    total = 240
    with served.transport() as t:
        t.publish_many(
            [(f"order-{i % 24:02d}", Event(kind="job", data={"n": i})) for i in range(total)]
        )
    page.goto(served.base + "/")
    row = page.locator(f'tr[data-queue="{served.queue}"]')
    messages = row.locator('td[data-count="messages"]')
    expect(messages).to_have_text(str(total))
    page.evaluate("window.__notReloaded = true")

    def handle(event: Event) -> None:
        time.sleep(0.02)

    worker_transport = served.transport()
    worker = Worker(worker_transport, handle, concurrency=2)
    report: list[object] = []
    thread = threading.Thread(
        target=lambda: report.append(
            worker.run(stop_when_idle=True, install_signal_handlers=False)
        ),
        daemon=True,
    )
    thread.start()
    seen = [total]
    shot = False
    deadline = time.monotonic() + 90
    try:
        while seen[-1] != 0 and time.monotonic() < deadline:
            text = messages.text_content(timeout=5000) or ""
            if text.strip().isdigit() and int(text) != seen[-1]:
                seen.append(int(text))
            if not shot and len(seen) >= 4 and seen[-1] > 0:
                shoot(page, served, "queues")
                shot = True
            time.sleep(0.05)
    finally:
        thread.join(60)
        worker_transport.close()
    assert seen[-1] == 0, f"the page still showed {seen[-1]} messages"
    assert seen == sorted(seen, reverse=True), seen
    assert len(seen) >= 3, f"no count between {total} and 0 was shown: {seen}"
    # The counts changed in place (htmx polling a fragment), not by reloading the page.
    assert page.evaluate("window.__notReloaded") is True
    assert report
    assert getattr(report[0], "acked", total) == total
    expect(row.locator('td[data-count="in_flight"]')).to_have_text("0")


def test_a_blocked_group_found_on_the_groups_page_is_unblocked_with_a_click(
    served: Served, page: Page
) -> None:
    group = "tenant/7"
    head = _block(served, group)
    with served.transport() as t:
        for i in range(6):
            t.publish(f"tenant/{i:02d}", Event(kind="charge"))
        t.pause("tenant/03")
    page.goto(f"{served.base}/queues/{served.queue}/groups")
    expect(page.locator("table.groups tbody tr")).to_have_count(7)
    shoot(page, served, "groups")
    page.select_option('select[name="state"]', "blocked")
    page.click('form.filters button[type="submit"]')
    page.wait_for_url("**state=blocked**")
    rows = page.locator("table.groups tbody tr")
    expect(rows).to_have_count(1)
    rows.get_by_role("link", name=group, exact=True).click()
    why = page.locator("#why")
    expect(why).to_contain_text("blocked since")
    expect(why).to_contain_text("ValueError: card declined by the bank")
    expect(page.locator("pre.traceback")).to_contain_text("Traceback (most recent call last)")
    shoot(page, served, "group")
    page.click('button[data-action="unblock"]')
    expect(page.locator("p.done")).to_have_text(
        f"unblocked the group: its head, message #{head}, is retried"
    )
    assert any(e.startswith("dialog confirm: Unblock group tenant/7") for e in page.evidence)  # type: ignore[attr-defined]
    expect(page.locator("#why")).to_contain_text("ready")
    with served.transport() as t:
        info = t.group(group)
        assert info is not None
        assert info.state == "ready"
        leases = t.claim_many(10)
        assert group in [lease.group_id for lease in leases]
        mine = next(lease for lease in leases if lease.group_id == group)
        assert mine.event.kind == "charge"
        assert t.ack(mine)


def test_a_redrive_click_puts_the_dead_letter_back_in_place(served: Served, page: Page) -> None:
    group = "order/1"
    with served.transport() as t:
        first = t.publish(group, Event(kind="step-1"))
        second = t.publish(group, Event(kind="step-2"))
        lease = t.claim()
        assert lease is not None
        assert lease.message_id == first
        error = _error("RuntimeError", "the warehouse said no", "shipping.py", "reserve")
        moved = t.dead_letter(lease, "rejected", error=error)
        assert moved
    page.goto(f"{served.base}/queues/{served.queue}/dead-letters")
    letter = page.locator("section.letter")
    expect(letter).to_have_count(1)
    expect(letter).to_contain_text("rejected")
    expect(letter).to_contain_text("RuntimeError: the warehouse said no")
    letter.locator("summary", has_text="traceback").click()
    shoot(page, served, "dead-letters")
    page.click('button[data-action="redrive"]')
    expect(page.locator("p.done")).to_contain_text("redrove the dead letter in place")
    expect(page.locator("section.letter")).to_have_count(0)
    with served.transport() as t:
        assert t.dead_letters() == []
        again = t.claim()
        assert again is not None
        assert (again.group_id, again.message_id, again.event.kind) == (group, first, "step-1")
        assert t.ack(again)
        then = t.claim()
        assert then is not None
        assert then.message_id == second


def test_a_page_of_hostile_data_runs_no_script(served: Served, page: Page) -> None:
    with served.transport() as t:
        for i, text in enumerate(HOSTILE_MARKUP):
            t.publish(text, Event(kind=text, data={"html": text}, headers={"x": text}))
            t.publish(f"dl-{i}", Event(kind=text, data={"html": text}))
        for i in range(len(HOSTILE_MARKUP)):
            lease = t.claim()
            while lease is not None and not lease.group_id.startswith("dl-"):
                t.release(lease)
                lease = t.claim()
            assert lease is not None
            text = HOSTILE_MARKUP[i % len(HOSTILE_MARKUP)]
            t.dead_letter(lease, text, error=text)
        for text in HOSTILE_GROUP_IDS[:6]:
            t.publish(text, Event(kind="k"))
    visited = [served.base + "/", f"{served.base}/queues/{served.queue}/groups?limit=1000"]
    page.goto(visited[1])
    assert page.evaluate("typeof window.__pwned") == "undefined"
    links = page.locator("table.groups td.id a")
    hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
    # The markup ids and six of the catalogue's (the dl-* groups emptied into dead letters).
    assert len(hrefs) == len(HOSTILE_MARKUP) + 6
    shown = {links.nth(i).text_content() for i in range(links.count())}
    assert set(HOSTILE_MARKUP) <= shown  # every id shows as its own text
    shoot(page, served, "hostile")
    visited += [served.base + str(href) for href in hrefs]
    visited.append(f"{served.base}/queues/{served.queue}/dead-letters?limit=1000")
    for address in visited:
        page.goto(address)
        page.wait_for_load_state("load")
        for summary in page.locator("summary").all():
            summary.click()
        assert page.evaluate("typeof window.__pwned") == "undefined", address
    page.goto(f"{served.base}/queues/{served.queue}/dead-letters?limit=1000")
    expect(page.locator("section.letter")).to_have_count(len(HOSTILE_MARKUP))
    for text in HOSTILE_MARKUP:
        expect(page.locator("section.letter td", has_text=text).first).to_be_visible()
    page.wait_for_timeout(1200)  # a live refresh or two swap in more of the same data
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evidence == []  # type: ignore[attr-defined]


def test_dropping_a_head_and_deleting_a_dead_letter_need_the_dialog_accepted(
    served: Served, page: Page
) -> None:
    group = "tenant/9"
    head = _block(served, group)
    with served.transport() as t:
        t.publish(group, Event(kind="refund"))  # stays in the group after its head is dropped
    page.goto(f"{served.base}/queues/{served.queue}/groups/{quote(group, safe='')}")
    page.click('button[data-action="drop-head"]')
    expect(page.locator("p.done")).to_have_text(
        f"unblocked the group: its head, message #{head}, went to the dead letters"
    )
    evidence: list[str] = page.evidence  # type: ignore[attr-defined]
    assert any(e.startswith(f"dialog confirm: Unblock group {group} and move") for e in evidence)
    with served.transport() as t:
        info = t.group(group)
        assert info is not None
        assert (info.state, info.depth) == ("ready", 1)
        (letter,) = t.dead_letters()
        assert (letter.group_id, letter.event.kind) == (group, "charge")
    page.goto(f"{served.base}/queues/{served.queue}/dead-letters")
    # The form sent without its dialog (no htmx, so no confirmation): the server refuses it.
    with page.expect_navigation():
        page.evaluate("document.querySelector('form[action$=\"/actions/delete\"]').submit()")
    expect(page.locator("h1")).to_have_text("400")
    expect(page.locator("p.error")).to_contain_text("the page's confirmation fills it in")
    with served.transport() as t:
        assert [d.id for d in t.dead_letters()] == [letter.id]
    page.goto(f"{served.base}/queues/{served.queue}/dead-letters")
    page.click('button[data-action="delete"]')
    expect(page.locator("p.done")).to_have_text("deleted the dead letter")
    assert any(e == f"dialog confirm: Delete dead letter #{letter.id} for good?" for e in evidence)
    with served.transport() as t:
        assert t.dead_letters() == []


def test_retry_now_and_cancelling_a_scheduled_message_by_click(served: Served, page: Page) -> None:
    group = "order/5"
    with served.transport(max_attempts=5) as t:
        head = t.publish(group, Event(kind="charge"))
        lease = t.claim()
        assert lease is not None
        assert t.nack(lease, delay=3600, error=_error("IOError", "bank down", "pay.py", "pay"))
        keep = t.publish("reminders", Event(kind="remind"), delay=7200)
        drop = t.publish("reminders", Event(kind="expire"), delay=3600)
    page.goto(f"{served.base}/queues/{served.queue}/groups/{quote(group, safe='')}")
    expect(page.locator("#why")).to_contain_text("parked until")
    page.click('button[data-action="retry-now"]')
    expect(page.locator("p.done")).to_contain_text("ended the retry delay")
    expect(page.locator("#why")).to_contain_text("ready")
    evidence: list[str] = page.evidence  # type: ignore[attr-defined]
    assert any(e.startswith(f"dialog confirm: Retry the head of group {group}") for e in evidence)
    page.click('nav a:text-is("scheduled")')
    rows = page.locator("table.scheduled tbody tr")
    expect(rows).to_have_count(2)
    expect(page.locator(f'tr[data-message="{drop}"]')).to_contain_text("expire")
    page.click(f'tr[data-message="{drop}"] button[data-action="cancel"]')
    expect(page.locator("p.done")).to_have_text(
        f"cancelled scheduled message #{drop}: it will not be delivered"
    )
    expect(rows).to_have_count(1)
    assert any(e.startswith(f"dialog confirm: Cancel scheduled message #{drop}") for e in evidence)
    with served.transport() as t:
        assert [m.id for m in t.scheduled()] == [keep]
        lease = t.claim()
        assert lease is not None
        assert (lease.message_id, lease.attempt) == (head, 2)
        assert t.ack(lease)


def test_a_message_id_leads_to_its_whole_story_on_the_history_page(
    served: Served, page: Page
) -> None:
    with served.transport() as t:
        if not (t.capabilities.history and isinstance(t, SupportsHistory)):
            pytest.skip(f"{served.backend} keeps no job history (Capabilities.history)")
        t.set_history("7d")
        story = t.publish("order-42", Event(kind="confirm", data={"order": 42}))
        other = t.publish("order-7", Event(kind="confirm", data={"order": 7}))
        first = {lease.message_id: lease for lease in t.claim_many(2, holder="mailer-1:77:0")}
        assert set(first) == {story, other}
        assert t.ack(first[other])
        error = _error("SMTPError", "mailbox full", "mail.py", "send")
        assert t.nack(first[story], error=error)
        again = t.claim(holder="mailer-2:78:1")
        assert again is not None
        assert (again.message_id, again.attempt) == (story, 2)
        assert t.ack(again)
        t.publish("order-8", Event(kind="confirm"))  # work still waiting: the queue is listed
    page.goto(f"{served.base}/queues/{served.queue}/history")
    rows = page.locator("table.history tbody tr")
    expect(rows).to_have_count(3)  # every record of the queue, newest first
    page.click(f'tr[data-record] td a:text-is("{story}")')  # a message id leads to its story
    expect(page.locator("h1")).to_contain_text(f"Message {story} of")
    expect(rows).to_have_count(2)
    acked, nacked = rows.nth(0), rows.nth(1)
    expect(acked.locator("td").nth(5)).to_have_text("acked")
    expect(acked.locator("td").nth(6)).to_have_text("2")
    expect(acked.locator("td").nth(8)).to_have_text("mailer-2:78:1")
    expect(nacked.locator("td").nth(5)).to_have_text("nacked")
    expect(nacked.locator("td").nth(6)).to_have_text("1")
    expect(nacked.locator("td").nth(8)).to_have_text("mailer-1:77:0")
    expect(nacked.locator("td").nth(9)).to_contain_text("SMTPError: mailbox full")
    shoot(page, served, "history")
    page.fill('input[name="message"]', str(other))  # the filter form finds it too
    page.click('form.filters button[type="submit"]')
    expect(rows).to_have_count(1)
    expect(rows.nth(0).locator("td").nth(2)).to_have_text(str(other))


#: A worker process that takes two groups and hangs in both handlers until it is killed.
_HANGING_WORKER = """
import sys, time
from pgque.core import Worker, connect
transport = connect(sys.argv[1], queue=sys.argv[2])
def hang(event):
    time.sleep(3600)
Worker(transport, hang, concurrency=2, name="mailer-9", heartbeat_every=0.2,
       visibility=300.0).run(install_signal_handlers=False)
"""


def test_a_worker_killed_mid_handler_shows_as_gone_with_the_leases_it_still_holds(
    served: Served, page: Page
) -> None:
    with served.transport() as t:
        if not (t.capabilities.workers and isinstance(t, SupportsWorkers)):
            pytest.skip(f"{served.backend} keeps no live workers (Capabilities.workers)")
        t.publish_many([("invoice-1", Event(kind="send")), ("invoice-2", Event(kind="send"))])
        process = subprocess.Popen(
            [sys.executable, "-c", _HANGING_WORKER, served.url, served.queue]
        )
        try:
            deadline = time.monotonic() + 30
            while not any(w.id == "mailer-9" and w.slots_busy == 2 for w in t.workers()):
                assert process.poll() is None, "the worker process ended on its own"
                assert time.monotonic() < deadline, "the worker did not take both groups"
                time.sleep(0.05)
        finally:
            process.kill()  # SIGKILL: no goodbye, no release
            process.wait(10)
        deadline = time.monotonic() + 10
        while any(w.alive for w in t.workers() if w.id == "mailer-9"):
            assert time.monotonic() < deadline, "a killed worker stayed alive"
            time.sleep(0.05)
    page.goto(f"{served.base}/queues/{served.queue}/workers")
    row = page.locator('tr[data-worker="mailer-9"]')
    expect(row).to_have_class("gone")
    expect(row.locator("td").nth(1)).to_have_text("gone")
    expect(row.locator("td").nth(8)).to_have_text("2")
    held = page.locator('table[data-held="mailer-9"]')
    for group in ("invoice-1", "invoice-2"):
        lease = held.locator(f'tr[data-lease="{group}"]')
        expect(lease).to_contain_text(re.compile(r"expires .*\(in [45]\.\d min\)"))
    shoot(page, served, "workers")
    with served.transport() as t:
        assert t.claim() is None  # the killed worker's leases still hold both groups


def test_a_bulk_retry_now_of_100_parked_groups_is_previewed_then_confirmed(
    served: Served, page: Page
) -> None:
    groups = [f"mail/{i:03d}" for i in range(100)]
    with served.transport() as t:
        t.publish_many([(g, Event(kind="send")) for g in groups])
        leases = t.claim_many(100)
        assert len(leases) == 100
        for lease in leases:
            assert t.nack(lease, delay=3600, error="SMTP down")
        t.publish("invoices", Event(kind="bill"))  # ready: the filter leaves it alone
    page.goto(f"{served.base}/queues/{served.queue}/groups")
    page.select_option('select[name="state"]', "parked")
    page.click('form.filters button[type="submit"]')
    page.wait_for_url("**state=parked**")
    page.click('button[data-action="bulk-retry-now"]')
    # The preview: how many match and which; nothing has changed yet.
    expect(page.locator("p.bulk-count")).to_contain_text("100 groups match")
    expect(page.locator("ul.bulk-ids li")).to_have_count(21)
    expect(page.locator("ul.bulk-ids")).to_contain_text("and 80 more")
    with served.transport() as t:
        assert len(t.groups(state="parked", limit=1000)) == 100
    shoot(page, served, "bulk-preview")
    page.click('button[data-action="bulk-retry-now-confirm"]')
    expect(page.locator("p.done")).to_have_text(
        "bulk retry now: 100 of 100 matching groups are claimable now"
    )
    assert not [e for e in page.evidence if e.startswith("pageerror")]  # type: ignore[attr-defined]
    with served.transport() as t:
        assert t.groups(state="parked", limit=1000) == []
        leases = t.claim_many(200)
        assert len(leases) == 101
        retried = [lease for lease in leases if lease.group_id.startswith("mail/")]
        assert sorted(lease.group_id for lease in retried) == groups
        assert {lease.attempt for lease in retried} == {2}
        assert all(t.ack_many(leases))


def test_ticked_dead_letters_are_deleted_in_bulk_and_the_rest_kept(
    served: Served, page: Page
) -> None:
    with served.transport() as t:
        t.publish_many([(f"order/{i}", Event(kind="ship")) for i in range(3)])
        for _ in range(3):
            lease = t.claim()
            assert lease is not None
            assert t.dead_letter(lease, "no stock")
        letters = t.dead_letters()
    page.goto(f"{served.base}/queues/{served.queue}/dead-letters")
    for letter in letters[:2]:
        page.check(f'input[type="checkbox"][value="{letter.id}"]')
    page.click('button[data-action="bulk-delete"]')
    expect(page.locator("p.bulk-count")).to_contain_text("2 dead letters match")
    page.click('button[data-action="bulk-delete-confirm"]')
    expect(page.locator("p.done")).to_have_text("bulk delete: deleted 2 of 2 matching dead letters")
    with served.transport() as t:
        assert [d.id for d in t.dead_letters()] == [letters[2].id]
