"""The caps scenario's own parts: groups dealt over capped keys, and the store's samples
judged against the caps (so a green caps run means something)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pgque_chaos.checks import Verdict
from pgque_chaos.harness import Scenario, _judge_samples, group_caps


def test_groups_are_dealt_over_the_keys_with_their_caps() -> None:
    s = Scenario(fault="caps", backend="postgres", groups=6, caps=(1, 3))
    assert group_caps(s) == {
        "g0000": ("k0", 1),
        "g0001": ("k1", 3),
        "g0002": ("k0", 1),
        "g0003": ("k1", 3),
        "g0004": ("k0", 1),
        "g0005": ("k1", 3),
    }
    assert group_caps(Scenario(fault="kill", backend="postgres")) == {}


def _judged(highest: dict[str, int], samples: int) -> tuple[Verdict, dict[str, Any]]:
    sampler = SimpleNamespace(highest=highest, samples=samples, failed=0)
    verdict = Verdict(events=1)
    notes: dict[str, Any] = {}
    caps = {"g0": ("k0", 1), "g1": ("k1", 3)}
    _judge_samples(sampler, caps, verdict, notes)  # type: ignore[arg-type]
    return verdict, notes


def test_a_key_seen_above_its_cap_is_a_violation() -> None:
    verdict, notes = _judged({"k0": 1, "k1": 3}, samples=500)
    assert verdict.violations == []
    assert notes["highest_in_flight"] == {"k0": 1, "k1": 3}
    verdict, _ = _judged({"k0": 2, "k1": 3}, samples=500)
    assert verdict.violations == ["key k0: the store showed 2 in flight, cap 1"]


def test_a_run_without_samples_proves_nothing() -> None:
    verdict, _ = _judged({}, samples=3)
    assert verdict.violations == ["the store was sampled 3 times only"]
