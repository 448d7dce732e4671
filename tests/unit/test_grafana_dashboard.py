"""The Grafana dashboard the chart ships (charts/conveyor/dashboards/conveyor-kafka-connect.json).

Two layers:

* Grafana's own dashboard schema: the Grafana Foundation SDK's Go types, which Grafana Labs
  generates from Grafana's CUE kinds, unmarshal the file strictly (unknown fields, wrong types,
  missing required fields, per panel plugin and for the Prometheus queries), through
  tools/grafana's ``dashboard-check`` (conveyor.testing.grafana). That needs Go, like the chart
  tests' helm: marked ``integration``, and it fails (never skips) when Go is missing.
* The layout and wiring that schema does not check, in Python: unique ids, panels on the
  24-column grid without overlaps, every query on the ``$datasource`` variable, every variable
  used defined.

Each layer is shown to reject a broken copy of the dashboard (a gridPos of the wrong type).
"""

from __future__ import annotations

import copy
import json
import re
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

DASHBOARD = Path(__file__).resolve().parents[2] / "charts" / "conveyor" / "dashboards" / "conveyor-kafka-connect.json"
GRID_COLUMNS = 24


def load() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def broken_grid_pos(board: dict[str, Any]) -> dict[str, Any]:
    """A copy with the first panel's gridPos height a string and the second's gridPos a list."""
    bad = copy.deepcopy(board)
    bad["panels"][1]["gridPos"]["h"] = "8"
    bad["panels"][2]["gridPos"] = [0, 0, 4, 4]
    return bad


# --------------------------------------------------------------------------------------------
# Grafana's schema (grafana-foundation-sdk, Go)


@pytest.fixture(scope="module")
def grafana_schema():
    """conveyor.testing.grafana, its dashboard-check built (a failure, never a skip, without Go)."""
    from conveyor.testing import grafana
    from conveyor.testing.errors import ComponentUnavailable

    error: ComponentUnavailable | None = None
    try:
        grafana.dashboard_check()
    except ComponentUnavailable as exc:
        error = exc  # fail outside the except block: no "during handling of..." noise
    if error is not None:
        pytest.fail(f"the dashboard schema check needs tools/grafana's dashboard-check: {error}", pytrace=False)
    return grafana


@pytest.mark.integration
def test_the_dashboard_is_valid_under_grafanas_schema(grafana_schema):
    result = grafana_schema.validate(DASHBOARD)
    assert result.returncode == 0, result.stderr
    assert re.search(r"valid dashboard, schemaVersion \d+, \d+ panels", result.stdout), result.stdout


@pytest.mark.integration
def test_grafanas_schema_rejects_a_broken_dashboard(grafana_schema, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(broken_grid_pos(load())))
    result = grafana_schema.validate(bad)
    assert result.returncode == 1, result.stdout
    assert "panels[1].gridPos.h" in result.stderr and "panels[2].gridPos" in result.stderr, result.stderr

    board = load()
    board["panels"][1]["targets"][0]["exp"] = board["panels"][1]["targets"][0].pop("expr")  # a typo
    bad.write_text(json.dumps(board))
    result = grafana_schema.validate(bad)
    assert result.returncode == 1
    assert "panels[1].targets[0].expr: required field is missing" in result.stderr, result.stderr
    assert "unexpected field 'exp'" in result.stderr, result.stderr


# --------------------------------------------------------------------------------------------
# layout and wiring (Python)


def _panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, rows' collapsed children included."""
    out = []
    for panel in board["panels"]:
        out.append(panel)
        out.extend(panel.get("panels") or [])
    return out


def layout_problems(board: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    for key in ("title", "uid", "schemaVersion", "panels", "templating"):
        if key not in board:
            problems.append(f"no {key}")
    panels = _panels(board)
    ids = [p.get("id") for p in panels]
    if len(ids) != len(set(ids)) or not all(isinstance(i, int) for i in ids):
        problems.append(f"panel ids not unique integers: {ids}")
    boxes = []
    for p in panels:
        pos = p.get("gridPos")
        if not isinstance(pos, dict) or not all(isinstance(pos.get(k), int) and not isinstance(pos.get(k), bool)
                                                for k in ("h", "w", "x", "y")):
            problems.append(f"panel {p.get('id')} ({p.get('title')}): gridPos {pos!r} is not {{h, w, x, y}} integers")
            continue
        if pos["w"] < 1 or pos["h"] < 1 or pos["x"] < 0 or pos["x"] + pos["w"] > GRID_COLUMNS:
            problems.append(f"panel {p.get('title')}: gridPos {pos} off the {GRID_COLUMNS}-column grid")
        boxes.append((p.get("title"), pos))
    for (t1, a), (t2, b) in combinations(boxes, 2):
        if a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]:
            problems.append(f"panels {t1!r} and {t2!r} overlap")
    variables = {v["name"] for v in board.get("templating", {}).get("list", [])}
    for p in panels:
        if p.get("type") == "row":
            continue
        targets = p.get("targets") or []
        if not targets:
            problems.append(f"panel {p.get('title')}: no query")
        refs = [t.get("refId") for t in targets]
        if len(refs) != len(set(refs)):
            problems.append(f"panel {p.get('title')}: refIds {refs} not unique")
        for source in [p.get("datasource"), *(t.get("datasource") for t in targets)]:
            if source != {"type": "prometheus", "uid": "${datasource}"}:
                problems.append(f"panel {p.get('title')}: datasource {source} is not the $datasource variable")
        for t in targets:
            if not t.get("expr"):
                problems.append(f"panel {p.get('title')}: query {t.get('refId')} has no expr")
    used = set(re.findall(r"\$\{?([A-Za-z_]\w*)", json.dumps(board))) - {"__rate_interval", "__interval"}
    if used - variables:
        problems.append(f"variables used but not defined: {sorted(used - variables)}")
    return problems


def test_the_dashboard_layout_and_wiring():
    board = load()
    assert layout_problems(board) == []
    assert board["uid"] == "conveyor-kafka-connect"
    assert [v["name"] for v in board["templating"]["list"]] == ["datasource", "namespace", "connector"]


def test_the_layout_check_rejects_a_broken_dashboard():
    problems = layout_problems(broken_grid_pos(load()))
    assert any("gridPos '8'" in p or "gridPos {'h': '8'" in p for p in problems), problems
    assert any("gridPos [0, 0, 4, 4]" in p for p in problems), problems
    board = load()
    board["panels"][1]["targets"][0]["datasource"] = {"type": "prometheus", "uid": "prom-1"}
    board["panels"][2]["gridPos"]["x"] = 20
    assert any("not the $datasource variable" in p for p in layout_problems(board))
    assert any("off the 24-column grid" in p or "overlap" in p for p in layout_problems(board))
