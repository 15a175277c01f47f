"""The fairness-key commands: ``keys``, ``key-policy``, ``publish --fairness-key`` and the
sentence of ``pgque group`` naming a key at its cap or out of tokens.

They run the command line's entry function in this process on a ``memory://NAME`` store (the
in-memory transport has fairness keys), checked through a transport of the test's own.
"""

from __future__ import annotations

import json

import pytest
from _in_process import Cli

from pgque.core import Event, InMemoryTransport, KeyInfo, KeyPolicy
from pgque.core.explain import explain
from pgque.core.models import GroupInfo


def test_publish_with_a_fairness_key(cli: Cli, queue: InMemoryTransport) -> None:
    result = cli("publish", "file-1", "page", "--fairness-key", "tenant-7")
    assert result.code == 0, result
    info = queue.group("file-1")
    assert info is not None
    assert info.fairness_key == "tenant-7"
    bad = cli("publish", "file-2", "page", "--fairness-key", "")
    assert bad.code == 1
    assert "fairness_key must not be empty" in bad.err


def test_key_policy_sets_shows_and_deletes(cli: Cli, queue: InMemoryTransport) -> None:
    shown = cli("key-policy", "tenant-7")
    assert (shown.code, shown.out) == (0, "tenant-7: no policy of its own\n")
    set_ = cli("key-policy", "tenant-7", "--weight", "3", "--max-in-flight", "5")
    assert (set_.code, set_.out) == (0, "tenant-7: weight 3, cap 5\n")
    assert queue.key_policy("tenant-7") == KeyPolicy(weight=3, max_in_flight=5)
    as_json = cli("key-policy", "tenant-7", "--json")
    assert json.loads(as_json.out)["max_in_flight"] == 5
    default = cli("key-policy", "--default", "--rate", "10", "--per", "60", "--burst", "2")
    assert default.out == "the default policy: weight 1, 10/60s burst 2\n"
    assert queue.key_policy(None) == KeyPolicy(rate=10, per=60, burst=2)
    assert cli("key-policy", "tenant-7", "--delete").out == "tenant-7: policy deleted\n"
    assert cli("key-policy", "tenant-7", "--delete").out == "tenant-7: had no policy\n"
    assert queue.key_policy("tenant-7") is None


def test_key_policy_refuses_bad_arguments(cli: Cli, queue: InMemoryTransport) -> None:
    assert cli("key-policy").code == 2  # neither KEY nor --default
    assert cli("key-policy", "k", "--default").code == 2
    assert cli("key-policy", "k", "--delete", "--weight", "2").code == 2
    bad = cli("key-policy", "k", "--weight", "0")
    assert bad.code == 1
    assert "weight must be above 0" in bad.err
    assert queue.key_policy("k") is None


def test_keys_lists_keys(cli: Cli, queue: InMemoryTransport) -> None:
    queue.set_key_policy("acme", max_in_flight=1)
    queue.publish("acme-1", Event(kind="job"), fairness_key="acme")
    queue.publish("acme-2", Event(kind="job"), fairness_key="acme")
    queue.publish("solo", Event(kind="job"))
    assert len(queue.claim_many(3)) == 2
    rows = [json.loads(line) for line in cli("keys", "--json").out.splitlines()]
    assert [(r["key"], r["in_flight"], r["groups"], r["messages"]) for r in rows] == [
        ("", 1, 1, 1),
        ("acme", 1, 2, 2),
    ]
    assert rows[1]["policy"]["max_in_flight"] == 1
    table = cli("keys")
    assert table.code == 0, table
    assert "(no key)" in table.out
    assert "1/1" in table.out  # acme at its cap
    page = cli("keys", "--limit", "1")
    assert "more keys may follow: --after ''" in page.err
    after = cli("keys", "--after", "", "--json").out
    rest = [json.loads(line)["key"] for line in after.splitlines()]
    assert rest == ["acme"]


def test_group_names_a_key_at_its_cap(cli: Cli, queue: InMemoryTransport) -> None:
    queue.set_key_policy("acme", max_in_flight=1)
    queue.publish("acme-1", Event(kind="job"), fairness_key="acme")
    queue.publish("acme-2", Event(kind="job"), fairness_key="acme")
    lease = queue.claim()
    assert lease is not None
    waiting = "acme-2" if lease.group_id == "acme-1" else "acme-1"
    result = cli("group", waiting)
    assert result.code == 0, result
    assert result.out.rstrip("\n").splitlines()[-1] == (
        "ready, but its key acme has 1 of 1 in flight: it waits until one of them is settled "
        "or its lease expires"
    )


def test_explain_names_a_key_out_of_tokens() -> None:
    now = 1_769_860_800.0
    info = GroupInfo(group_id="g", state="ready", depth=1, priority=0, fairness_key="t")
    key = KeyInfo(
        key="t",
        policy=KeyPolicy(rate=2, per=60),
        tokens=0.5,
        next_token_at=now + 15,
    )
    assert explain(info, now=now, key=key) == (
        "ready, but its key t is out of tokens (2 per 60 s): the next comes at 12:00:15 UTC "
        "(in 15.0 s)"
    )
    free = key.model_copy(update={"tokens": 1.5, "next_token_at": None})
    assert explain(info, now=now, key=free).startswith("ready: ")


def test_a_backend_without_fairness_is_refused_in_one_line() -> None:
    from pgque.core import Capabilities
    from pgque.core.cli._errors import CliError
    from pgque.core.cli._keys import _fair

    class Unfair(InMemoryTransport):
        CAPABILITIES = Capabilities(fairness=False)

    with Unfair() as transport:
        with pytest.raises(CliError, match="does not support fairness keys"):
            _fair(transport)
        with pytest.raises(Exception, match="does not support fairness keys"):
            transport.publish("g", Event(kind="k"), fairness_key="tenant")
    with InMemoryTransport() as fair:
        assert _fair(fair) is fair
