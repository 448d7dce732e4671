"""Class-data sharing for a local driver's JVM (``conveyor.runtime.driver.class_data``): which
JVM options a start gets, one process making the archive at a time, the archive moved into
place once written."""

from __future__ import annotations

import os
import time

import pytest

from conveyor.runtime.driver.class_data import STALE_LOCK_S, with_class_data_sharing

LOCAL = {"spark.master": "local[2]"}


@pytest.fixture(autouse=True)
def _enabled(monkeypatch):
    monkeypatch.delenv("CONVEYOR_SPARK_CDS", raising=False)


def test_the_first_run_makes_the_archive_and_later_runs_use_it(tmp_path):
    props, training = with_class_data_sharing(LOCAL, tmp_path)
    assert training is not None and training.lock.exists()
    assert f"-XX:ArchiveClassesAtExit={training.temporary}" in props["spark.driver.extraJavaOptions"]
    again, other = with_class_data_sharing(LOCAL, tmp_path)
    assert other is None and "spark.driver.extraJavaOptions" not in again, "one process makes it at a time"
    training.temporary.write_bytes(b"archive")  # what the exiting JVM writes
    assert training.install(None)
    assert training.final.read_bytes() == b"archive" and not training.lock.exists()
    later, none = with_class_data_sharing({**LOCAL, "spark.driver.extraJavaOptions": "-Dx=1"}, tmp_path)
    assert none is None
    assert later["spark.driver.extraJavaOptions"].startswith(f"-XX:SharedArchiveFile={training.final} -Xshare:auto")
    assert later["spark.driver.extraJavaOptions"].endswith(" -Dx=1"), "the user's options kept"


def test_a_stale_lock_and_temporaries_are_taken_over(tmp_path):
    _, first = with_class_data_sharing(LOCAL, tmp_path)
    assert first is not None
    first.temporary.write_bytes(b"partial")
    old = time.time() - STALE_LOCK_S - 1
    os.utime(first.lock, (old, old))
    os.utime(first.temporary, (old, old))
    _, second = with_class_data_sharing(LOCAL, tmp_path)
    assert second is not None and not first.temporary.exists()


def test_a_failed_dump_leaves_no_archive_and_frees_the_lock(tmp_path):
    _, training = with_class_data_sharing(LOCAL, tmp_path)
    assert not training.install(None)  # the JVM wrote nothing
    assert not training.final.exists() and not training.lock.exists()


def test_the_archive_is_installed_by_a_detached_process_once_the_jvm_exits(tmp_path):
    import subprocess
    import sys

    _, training = with_class_data_sharing(LOCAL, tmp_path)
    jvm = subprocess.Popen([sys.executable, "-c", f"import sys, time; sys.stdin.read(); time.sleep(0.3); "
                                                  f"open({str(training.temporary)!r}, 'wb').write(b'dump')"],
                           stdin=subprocess.PIPE)
    training.finish(jvm)  # closes the "JVM"'s stdin; returns at once
    assert not training.final.exists()
    jvm.wait(10)
    deadline = time.monotonic() + 20
    while not training.final.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert training.final.read_bytes() == b"dump" and not training.lock.exists()


@pytest.mark.parametrize("props", [
    {"spark.master": "k8s://https://127.0.0.1:6443"},
    {**LOCAL, "spark.driver.extraJavaOptions": "-XX:SharedArchiveFile=/opt/spark.jsa"},
    {**LOCAL, "spark.driver.extraJavaOptions": "-Xshare:off"},
])
def test_clusters_and_a_users_own_class_data_options_are_left_alone(tmp_path, props):
    assert with_class_data_sharing(props, tmp_path) == (props, None)


def test_it_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVEYOR_SPARK_CDS", "false")
    assert with_class_data_sharing(LOCAL, tmp_path) == (LOCAL, None)
