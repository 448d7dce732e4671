"""What ``.status`` shows of a failure: a one-line summary, not the trace (issue 13 §7)."""

from conveyor_operator.observe.driver_status import TRACE_SUMMARY_CHARS
from conveyor_operator.observe.driver_status import short_trace as _short

TRACE = """Traceback (most recent call last):
  File "/opt/venv/lib/python3.11/site-packages/conveyor/connectors/postgres/sink.py", line 312, in put
    cursor.executemany(sql, rows)
psycopg.errors.UniqueViolation: duplicate key value violates unique constraint "orders_pkey"
DETAIL:  Key (id, customer)=(42, alice@example.com) already exists.
"""


def test_a_trace_becomes_its_exception_line_without_the_detail_quoting_rows():
    assert _short(TRACE) == ('psycopg.errors.UniqueViolation: duplicate key value violates unique constraint '
                             '"orders_pkey"')
    assert _short("ValueError: bad\n") == "ValueError: bad"
    assert _short(None) is None and _short("") is None
    chained = TRACE + "\nDuring handling of the above exception, another exception occurred:\n\n" + (
        'Traceback (most recent call last):\n  File "x.py", line 1, in f\n    g()\nConnectError: put failed\n')
    assert _short(chained) == "ConnectError: put failed"


def test_a_summary_is_bounded():
    summary = _short("RuntimeError: " + "x" * 5000)
    assert len(summary) == TRACE_SUMMARY_CHARS and summary.endswith("…")
