"""Application class-data sharing (AppCDS, JEP 350) for the JVM of a local driver: Spark's
classes loaded from an archive instead of parsed and verified at every start.

Measured on a 2-core machine (Java 17, Spark 4.x): the SparkSession of a ``conveyor run``
starts in ~4 s with the archive against ~8 s without it.

The archive is made by the first ``conveyor run`` that finds none (``-XX:ArchiveClassesAtExit``:
the JVM writes it as it exits, ~100 MB, a few seconds once) and used by every later one
(``-XX:SharedArchiveFile``, ``-Xshare:auto``: an archive that does not fit the JVM is
ignored). It lives in ``$XDG_CACHE_HOME/conveyor/spark-cds/`` (``~/.cache/...``), one per
PySpark version and Java binary. One process at a time makes it (a lock file, taken over
when older than :data:`STALE_LOCK_S`); it is written under a temporary name and renamed
once complete.

Only for a local master: on Kubernetes the driver pod's cache does not outlive the pod, and
writing the archive would lengthen its stop. A ``spark.driver.extraJavaOptions`` that
already mentions class-data sharing is left alone; ``CONVEYOR_SPARK_CDS=false`` turns it off.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

STALE_LOCK_S = 600.0
DUMP_WAIT_S = 60.0
_OPTION = "spark.driver.extraJavaOptions"
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


class ArchiveTraining:
    """A JVM that writes the archive as it exits: :meth:`finish` ends it and leaves a
    detached process to :meth:`install` the archive once written."""

    def __init__(self, temporary: Path, final: Path, lock: Path) -> None:
        self.temporary, self.final, self.lock = temporary, final, lock

    def finish(self, gateway_process: subprocess.Popen[Any] | None) -> None:
        """After the session stopped: end the JVM (its stdin closed) and leave a detached
        process to move the archive into place once the JVM has written it and exited (up
        to :data:`DUMP_WAIT_S`), so that the driver's stop does not wait for it."""
        if gateway_process is None:
            self.install(None)
            return
        if gateway_process.stdin is not None:
            gateway_process.stdin.close()
        try:
            subprocess.Popen([sys.executable, "-m", "conveyor.runtime.driver.class_data", str(gateway_process.pid),
                              str(self.temporary), str(self.final), str(self.lock)],
                             start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
            log.info("Spark's class-data archive is being written to %s (once: later runs start faster)", self.final)
        except OSError as exc:
            log.warning("Spark's class-data archive was not saved: %s", exc)
            self.lock.unlink(missing_ok=True)

    def install(self, jvm_pid: int | None, wait_s: float = DUMP_WAIT_S) -> bool:
        """Wait for the JVM ``jvm_pid`` to exit, then move a complete archive into place;
        always release the lock. Returns whether an archive was installed."""
        deadline = time.monotonic() + wait_s
        try:
            while jvm_pid is not None and _running(jvm_pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if (jvm_pid is None or not _running(jvm_pid)) and self.temporary.exists() and self.temporary.stat().st_size:
                os.replace(self.temporary, self.final)
                return True
            return False
        except OSError:
            return False
        finally:
            self.temporary.unlink(missing_ok=True)
            self.lock.unlink(missing_ok=True)


def _running(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie has exited)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def with_class_data_sharing(props: Mapping[str, str], cache: Path | None = None) -> tuple[dict[str, str],
                                                                                         ArchiveTraining | None]:
    """``props`` with the driver JVM's class-data sharing options (see the module
    docstring), and the training to finish at stop when this JVM makes the archive."""
    out = dict(props)
    from conveyor.runtime.driver.spark_session import is_local_master

    existing = out.get(_OPTION, "")
    if (os.environ.get("CONVEYOR_SPARK_CDS", "true").lower() == "false" or not is_local_master(out["spark.master"])
            or "SharedArchiveFile" in existing or "ArchiveClassesAtExit" in existing or "Xshare" in existing):
        return out, None
    archive = _archive_path(cache)
    if archive is None:
        return out, None
    training = None
    if archive.exists():
        options = f"-XX:SharedArchiveFile={archive} -Xshare:auto {_QUIET}"
    else:
        lock = archive.with_name(archive.name + ".lock")
        if not _take(lock):
            return out, None
        temporary = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
        options = f"-XX:ArchiveClassesAtExit={temporary} {_QUIET}"
        training = ArchiveTraining(temporary, archive, lock)
        log.info("this run writes Spark's class-data archive when it stops (once: later runs start faster)")
    out[_OPTION] = f"{options} {existing}".strip()
    return out, training


def _archive_path(cache: Path | None) -> Path | None:
    java = Path(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else None
    if java is None or not java.exists():
        found = shutil.which("java")
        java = Path(found) if found else None
    if java is None:
        return None
    try:
        import pyspark

        java = java.resolve()
        identity = f"{pyspark.__version__}\0{java}\0{java.stat().st_mtime_ns}"
        root = cache or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "conveyor" / "spark-cds"
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return root / f"spark-{pyspark.__version__}-{hashlib.sha256(identity.encode()).hexdigest()[:12]}.jsa"


def _take(lock: Path) -> bool:
    """Create ``lock`` (or take over a stale one); ``False`` when another process holds it."""
    for _ in range(2):
        try:
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            _remove_stale_temporaries(lock.parent)
            return True
        except FileExistsError:
            try:
                if time.time() - lock.stat().st_mtime < STALE_LOCK_S:
                    return False
                lock.unlink()
            except OSError:
                return False
        except OSError:
            return False
    return False


def _remove_stale_temporaries(root: Path) -> None:
    """Archives a JVM wrote after its start-up failed (never renamed into place)."""
    for temporary in root.glob("*.jsa.*.tmp"):
        try:
            if time.time() - temporary.stat().st_mtime >= STALE_LOCK_S:
                temporary.unlink()
        except OSError:
            pass


if __name__ == "__main__":  # the detached process of ArchiveTraining.finish
    _pid, _temporary, _final, _lock = sys.argv[1:5]
    ArchiveTraining(Path(_temporary), Path(_final), Path(_lock)).install(int(_pid))
