"""scripts/test_timings.py: each tier's total and the slowest tests, from pytest's JUnit XML."""

from __future__ import annotations

import runpy
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "test_timings.py"

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.unit.test_a" name="test_fast" time="0.5"/>
<testcase classname="tests.e2e.test_b" name="test_slow" time="120.0"/>
<testcase classname="tests.e2e.test_b" name="test_medium[x]" time="30.0"/>
<testcase classname="tests.kube.test_c" name="test_k" time="10.0"/>
</testsuite></testsuites>
"""


def test_tiers_are_summed_and_the_slowest_listed_first(tmp_path, capsys):
    report = tmp_path / "junit.xml"
    report.write_text(REPORT)
    main = runpy.run_path(str(SCRIPT))["main"]
    assert main([str(report), "--top", "2"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[1].split() == ["e2e", "2", "150", "2.5"]
    assert ["all", "4", "160", "2.7"] in [line.split() for line in lines]
    slowest = out.split("slowest")[1].strip().splitlines()[1:]
    assert [line.split()[1] for line in slowest] == ["tests/e2e/test_b.py::test_slow", "tests/e2e/test_b.py::test_medium[x]"]


def test_a_missing_report_says_so(tmp_path, capsys):
    main = runpy.run_path(str(SCRIPT))["main"]
    assert main([str(tmp_path / "absent.xml")]) == 1
    assert "no JUnit XML" in capsys.readouterr().err
