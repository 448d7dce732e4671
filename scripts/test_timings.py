"""Where the suite's time goes, from the JUnit XML every ``python -m pytest`` writes
(``test-reports/junit.xml``, set in ``pyproject.toml``): each tier's total and count, and the
slowest tests (set-up, call and teardown together, pytest's ``junit_duration_report = total``).

    python scripts/test_timings.py [test-reports/junit.xml] [--top 30]
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

DEFAULT_REPORT = Path("test-reports/junit.xml")


def _tier(classname: str) -> str:
    parts = classname.split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else "other"


def _name(case: ET.Element) -> str:
    return f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name', '')}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", nargs="?", type=Path, default=DEFAULT_REPORT)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args(argv)
    if not args.report.is_file():
        print(f"no JUnit XML at {args.report}", file=sys.stderr)
        return 1
    cases = list(ET.parse(args.report).getroot().iter("testcase"))
    totals: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for case in cases:
        tier = _tier(case.get("classname", ""))
        totals[tier] += float(case.get("time") or 0)
        counts[tier] += 1
    print(f"{'tier':<12} {'tests':>6} {'seconds':>9} {'minutes':>8}")
    for tier in sorted(totals, key=totals.__getitem__, reverse=True):
        print(f"{tier:<12} {counts[tier]:>6} {totals[tier]:>9.0f} {totals[tier] / 60:>8.1f}")
    whole = sum(totals.values())
    print(f"{'all':<12} {len(cases):>6} {whole:>9.0f} {whole / 60:>8.1f}")
    print(f"\nthe {args.top} slowest (set-up + call + teardown):")
    for case in sorted(cases, key=lambda c: float(c.get("time") or 0), reverse=True)[:args.top]:
        print(f"{float(case.get('time') or 0):8.1f}s  {_name(case)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
