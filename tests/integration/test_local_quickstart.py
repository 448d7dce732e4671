"""The README's first command, ``bash examples/quickstart.sh``, run as a new user runs it: a new
process with its own Kafka broker and PostgreSQL (no ``CONVEYOR_*`` variable points it at the
session's), the dependencies already installed (by CI, or by the user's first run), judged by
the output the user reads. The process boundary is what this test is about, so it starts one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ORDERS = 300


def test_the_local_quickstart_moves_every_order_and_sends_the_malformed_one_to_the_dead_letter_queue() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_") or k == "CONVEYOR_CACHE_DIR"}
    env["COLUMNS"] = "200"  # rich wraps at 80 columns without a terminal
    ran = subprocess.run(["bash", "examples/quickstart.sh", "--orders", str(ORDERS)], cwd=REPO, env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
    out = ran.stdout + ran.stderr
    assert ran.returncode == 0, out[-6000:]
    assert f"produced {ORDERS:,} orders and 1 malformed record" in out, out[-6000:]
    assert f"PostgreSQL table orders: {ORDERS:,} rows" in out, out[-6000:]
    assert "dead-letter queue orders-dlq: b'{this is not json' from orders-" in out, out[-6000:]
    assert '"state": "RUNNING"' in out, out[-6000:]
    assert "quickstart done" in out, out[-6000:]
