"""The harness's own arithmetic: medians and spreads, round order, the targets table."""

from __future__ import annotations

import pytest
from pgque_bench import plan
from pgque_bench._common import Sizes, rotated, summarise
from pgque_bench._report import TARGETS, spread_text, target_rows, targets_markdown


def test_summarise_gives_the_median_and_the_spread_of_the_rounds() -> None:
    summary = summarise([100.0, 300.0, 200.0])
    assert summary == {"median": 200.0, "min": 100.0, "max": 300.0, "spread": 1.0, "rounds": 3}


def test_summarise_of_an_even_count_takes_the_mean_of_the_middle_two() -> None:
    summary = summarise([10.0, 40.0, 20.0, 30.0])
    assert summary["median"] == 25.0
    assert summary["spread"] == pytest.approx(30.0 / 25.0)


def test_summarise_of_no_rounds_has_no_numbers() -> None:
    assert summarise([]) == {"median": None, "min": None, "max": None, "spread": None, "rounds": 0}


def test_spread_text_shows_min_max_and_the_range_over_the_median() -> None:
    assert spread_text(summarise([900.0, 1_000.0, 1_100.0])) == "900-1,100 (20%)"
    assert spread_text(summarise([])) == "-"


def test_rounds_rotate_so_no_case_always_runs_first() -> None:
    cases = ["a", "b", "c"]
    assert rotated(cases, 0) == ["a", "b", "c"]
    assert rotated(cases, 1) == ["b", "c", "a"]
    assert rotated(cases, 3) == ["a", "b", "c"]
    assert [rotated(cases, r)[0] for r in range(3)] == ["a", "b", "c"]
    assert rotated([], 2) == []


def _all_values(value: float) -> dict[str, float | None]:
    keys = {t.numerator for t in TARGETS} | {t.denominator for t in TARGETS if t.denominator}
    return dict.fromkeys(keys, value)


def test_targets_are_ratios_of_medians_judged_against_their_goal() -> None:
    values = _all_values(1_000.0)
    values["worker-async-8"] = 1_500.0  # target 1: 1.5x >= 1.5x
    values["pg-async-batch"] = 1_000.0
    values["pgqueuer-asyncpg-best"] = 2_000.0  # target 3: 0.5x, goal >= 1.5x
    values["latency-postgres-load:p99_ms"] = 42.0  # target 7: <= 50 ms
    values["dashboard-postgres:slowest_ms"] = 120.0  # target 34: <= 100 ms
    rows = {row["n"]: row for row in target_rows(values, {})}
    assert [row["n"] for row in rows.values()] == list(range(1, 35))
    assert rows[34]["measured"] == "120.0 ms"
    assert rows[34]["met"] is False
    assert rows[1]["measured"] == "1.50x"
    assert rows[1]["met"] is True
    assert rows[3]["value"] == pytest.approx(0.5)
    assert rows[3]["met"] is False
    assert rows[7]["measured"] == "42.0 ms"
    assert rows[7]["goal"] == "<= 50 ms"
    assert rows[7]["met"] is True
    assert rows[8]["goal"] == ">= 5x"


def test_a_target_whose_case_failed_shows_the_error_and_is_not_judged() -> None:
    values = _all_values(1_000.0)
    values["pgbench-settle-claim"] = None
    errors = {"pgbench-settle-claim": "FileNotFoundError: needs pgque_settle_claim_v1"}
    row = next(r for r in target_rows(values, errors) if r["n"] == 4)
    assert row["met"] is None
    assert row["value"] is None
    assert "needs pgque_settle_claim_v1" in row["measured"]


def test_a_target_whose_case_did_not_run_shows_a_dash() -> None:
    row = next(r for r in target_rows({}, {}) if r["n"] == 6)
    assert (row["measured"], row["met"]) == ("-", None)


def test_targets_markdown_is_one_row_per_target_with_met_in_words() -> None:
    values = _all_values(1_000.0)
    values["latency-postgres-load:p99_ms"] = 80.0
    errors = {"pg-fused-1": "RuntimeError: a | b"}
    text = targets_markdown(target_rows(values, errors))
    lines = text.splitlines()
    assert lines[0] == "| # | target | measured | goal | met |"
    assert len(lines) == 2 + len(TARGETS)
    assert lines[2].endswith("| 1.00x | >= 1.5x | **no** |")
    assert lines[8].endswith("| 80.0 ms | <= 50 ms | **no** |")
    assert "error: pg-fused-1: RuntimeError: a / b | >= 0.8x | - |" in lines[5]


@pytest.mark.parametrize("quick", [True, False])
def test_every_target_has_its_cases_in_the_plan(quick: bool) -> None:
    ids = {case.id for case in plan(Sizes.build(quick), True, True, True)}
    for target in TARGETS:
        assert target.numerator.split(":")[0] in ids
        assert target.denominator is None or target.denominator.split(":")[0] in ids


def test_every_drain_case_drains_the_same_backlog() -> None:
    sizes = Sizes.build(False)
    assert sizes.drain_messages == 10_000
    cases = plan(sizes, True, True, True)
    for section in ("drain", "workers"):
        shapes = {
            (c.args["groups"], c.args["per_group"])
            for c in cases
            if c.section == section and "groups" in c.args
        }
        assert len(shapes) == 1, (section, shapes)
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids))


def test_slots_are_judged_against_the_best_peer_and_io_against_its_ceiling() -> None:
    """Targets 25-28 divide pgque's rate at N slots by the higher of the peers' at N; target 30
    divides the I/O-bound rate by the lesser of its own no-op rate and 20,000/s."""
    from pgque_bench._report import medians

    def case(case_id: str, median: float) -> dict[str, object]:
        summary = {"median": median, "min": median, "max": median, "rounds": 1}
        return {"id": case_id, "section": "slots", "summary": summary, "last": {}}

    results = {
        "cases": [
            case("slots-pgque-4", 3_000.0),
            case("slots-pgqueuer-4", 2_000.0),
            case("slots-procrastinate-4", 2_500.0),
            case("slots-pgque-64", 4_000.0),
            case("slots-pgqueuer-64", 5_000.0),
            case("io-pgque-200", 9_000.0),
            case("io-pgque-200-noop", 30_000.0),
            case("io-pgqueuer-200", 6_000.0),
        ]
    }
    values = medians(results)
    assert values["slots-pgque-4:best_peer"] == 2_500.0
    assert values["slots-pgque-64:best_peer"] == 5_000.0
    assert values["io-pgque-200:ceiling"] == 20_000.0
    rows = {row["n"]: row for row in target_rows(values, {})}
    assert rows[26]["value"] == pytest.approx(1.2)
    assert rows[26]["met"] is True
    assert rows[28]["value"] == pytest.approx(0.8)
    assert rows[28]["met"] is False
    assert rows[25]["met"] is None  # no case at one slot ran
    assert rows[29]["value"] == pytest.approx(1.5)
    assert rows[30]["value"] == pytest.approx(0.45)
    assert rows[30]["met"] is False
