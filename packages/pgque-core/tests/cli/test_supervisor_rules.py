"""The supervisor's give-up rules, without processes (``pgque worker --processes``)."""

from __future__ import annotations

from pgque.core.cli._supervisor import DeathRecord


def test_an_error_exit_soon_after_the_start_gives_up_at_once() -> None:
    rules = DeathRecord(allowed=5, window_s=60, start_s=5)
    verdict = rules.verdict(now=100.0, lived_s=1.0, returncode=1)
    assert verdict is not None
    assert "not restarting" in verdict


def test_a_signal_or_a_late_error_is_restarted() -> None:
    rules = DeathRecord(allowed=5, window_s=60, start_s=5)
    assert rules.verdict(now=100.0, lived_s=1.0, returncode=-9) is None  # killed: restart
    assert rules.verdict(now=101.0, lived_s=30.0, returncode=1) is None


def test_too_many_deaths_within_the_window_give_up() -> None:
    rules = DeathRecord(allowed=2, window_s=10, start_s=5)
    assert rules.verdict(now=0.0, lived_s=6, returncode=-9) is None
    assert rules.verdict(now=5.0, lived_s=6, returncode=-9) is None
    verdict = rules.verdict(now=9.0, lived_s=6, returncode=-9)
    assert verdict is not None
    assert "died 3 times within 10 s" in verdict


def test_deaths_older_than_the_window_are_forgotten() -> None:
    rules = DeathRecord(allowed=2, window_s=10, start_s=5)
    for now in (0.0, 5.0, 10.5, 16.0, 21.0, 26.5):
        assert rules.verdict(now=now, lived_s=6, returncode=-9) is None
