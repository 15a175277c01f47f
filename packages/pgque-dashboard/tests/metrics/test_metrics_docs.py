"""The alerting rules and the Grafana dashboard of the docs use only metrics pgque exposes."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pgque.core import Event, connect
from pgque.dashboard.metrics import QueueMetricsCollector

DOCS = Path(__file__).resolve().parents[4] / "docs"
RULES = DOCS / "prometheus-rules.yml"
DASHBOARD = DOCS / "grafana" / "pgque.json"
METRIC = re.compile(r"\bpgque_[a-z_]+\b")
DURATION = re.compile(r"^\d+[smhdwy]$")


@pytest.fixture(scope="module")
def exposed() -> set[str]:
    """Every family and sample name a scrape of a busy queue shows."""
    with connect("memory://") as transport:
        for group in ("a", "b", "c"):
            transport.publish(group, Event(kind="k"))
        lease = transport.claim()
        assert lease is not None
        assert transport.nack(lease, delay=60)
        lease = transport.claim()
        assert lease is not None
        assert transport.dead_letter(lease, "bad")
        registry = CollectorRegistry(auto_describe=False)
        registry.register(QueueMetricsCollector(transport))
        text = generate_latest(registry).decode()
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
    return names


def _referenced(expr: str) -> set[str]:
    return set(METRIC.findall(expr))


def test_the_rules_parse_and_use_exposed_metrics(exposed: set[str]) -> None:
    document = yaml.safe_load(RULES.read_text())
    rules = [rule for group in document["groups"] for rule in group["rules"]]
    assert {rule["alert"] for rule in rules} >= {"PgqueGroupStuck", "PgqueDeadLettersGrowing"}
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
        assert isinstance(rule["expr"], str)
        names = _referenced(rule["expr"])
        assert names, f"{rule['alert']} uses no pgque metric"
        assert names <= exposed, f"{rule['alert']} uses unknown metrics {names - exposed}"
        assert DURATION.match(rule.get("for", "0s")), rule
        assert rule["expr"].count("(") == rule["expr"].count(")"), rule


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def test_every_dashboard_expression_uses_exposed_metrics(exposed: set[str]) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = list(_panels(dashboard["panels"]))
    assert len(panels) >= 8
    used: set[str] = set()
    for panel in panels:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            names = _referenced(target["expr"])
            assert names, f"{panel['title']}: {target['expr']} uses no pgque metric"
            assert names <= exposed, f"{panel['title']} uses unknown metrics {names - exposed}"
            used |= names
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            assert _referenced(variable["definition"]) <= exposed
    # The panels show the head ages and every per-queue count.
    assert {
        "pgque_group_head_age_seconds",
        "pgque_messages",
        "pgque_dead_letters",
        "pgque_blocked_groups",
        "pgque_oldest_message_age_seconds",
        "pgque_up",
    } <= used
