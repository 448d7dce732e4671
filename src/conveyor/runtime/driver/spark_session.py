"""The SparkSession a connector's driver creates: its properties (defaults, the manifest's
``sparkConf``, ``--conf`` and ``--master``, loopback binding for a local master, an executor
slot per task on a cluster master, authenticated and encrypted RPC always) and how its JVM
is started."""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from conveyor.runtime.driver.passwd_entry import ensure_passwd_entry
from conveyor.spark_security import ENFORCED, changed_enforced

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
SPARK_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}
"""The driver's own Spark properties (``spec.spark.sparkConf`` and ``--conf`` override them)."""

LOCAL_DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
"""The JVM of a local master compiles with C1 only. Its work is scheduling: the tasks' records
never cross it (each task's Python worker reads and writes Kafka itself), so the C2 compiler's
faster code never pays back its start-up cost. Measured on a 2-core machine: the SparkSession
of a ``conveyor run`` starts in 1.9 s against 2.8 s, first records written 3.9 s after launch
against 5.2 s. Left out when ``spark.driver.extraJavaOptions`` already sets the JIT
(``Tiered``)."""


class SparkConfRefused(ValueError):
    """``spec.spark.sparkConf`` or ``--conf`` tried to change a property of
    :data:`conveyor.spark_security.ENFORCED`; the message names each key."""


def spark_properties(
    connector: str,
    task_count: int,
    master: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
    cli_conf: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The Spark properties of the session a driver creates, later sources winning:

    1. the driver's defaults: :data:`SPARK_DEFAULTS`, ``spark.app.name`` ``conveyor-<name>``;
    2. ``spark_conf``: the manifest's ``spec.spark.sparkConf``;
    3. ``cli_conf``: ``conveyor run --conf key=value``;
    4. ``master`` (``conveyor run --master``), when given, as ``spark.master``;
    5. :data:`conveyor.spark_security.ENFORCED` (authenticated, AES-GCM encrypted RPC), on every
       master: on a local one Spark generates the secret itself.

    Without any ``spark.master`` the master is ``local[N]`` with a slot per task. Unless set,
    ``spark.task.maxFailures`` is 1 on a local master (a failed task is the runtime's to
    report, not Spark's to retry) and 4 elsewhere (an executor lost is retried). A local
    master binds the driver and its block manager to loopback (``spark.driver.host`` and
    ``spark.driver.bindAddress`` ``127.0.0.1``) unless they are set: nothing of a local run
    listens on the machine's outward interfaces; its JVM gets :data:`LOCAL_DRIVER_JAVA_OPTIONS`. On a cluster master without dynamic
    allocation, ``spark.executor.instances`` is raised until every task has a slot.

    Returns:
        ``{property: value}``, always with ``spark.master``, ``spark.app.name`` and the
        enforced properties.

    Raises:
        SparkConfRefused: ``spark_conf`` or ``cli_conf`` gives an enforced property another value.
    """
    for source, conf in (("spec.spark.sparkConf", spark_conf), ("--conf", cli_conf)):
        refuse_enforced_changes(conf or {}, source)
    props = {**SPARK_DEFAULTS, "spark.app.name": f"conveyor-{connector}"}
    props.update(spark_conf or {})
    props.update(cli_conf or {})
    if master:
        props["spark.master"] = master
    props.setdefault("spark.master", f"local[{max(task_count, 1)}]")
    local = is_local_master(props["spark.master"])
    props.setdefault("spark.task.maxFailures", "1" if local else "4")
    if local:
        props.setdefault("spark.driver.host", LOOPBACK)
        props.setdefault("spark.driver.bindAddress", LOOPBACK)
        java_options = props.get("spark.driver.extraJavaOptions", "")
        if "Tiered" not in java_options:
            props["spark.driver.extraJavaOptions"] = f"{LOCAL_DRIVER_JAVA_OPTIONS} {java_options}".strip()
    elif not dynamic_allocation(props):
        _give_every_task_a_slot(props, task_count)
    props.update(ENFORCED)
    return props


def refuse_enforced_changes(conf: Mapping[str, str], source: str) -> None:
    """Raise :class:`SparkConfRefused` naming each key of ``conf`` (from ``source``, e.g.
    ``--conf``) that would change an enforced property; the same value passes."""
    changed = changed_enforced(conf)
    if changed:
        raise SparkConfRefused("; ".join(
            f"{source} {key}={value}: refused, {key} is always {ENFORCED[key]} (Spark RPC is authenticated "
            "and encrypted)" for key, value in changed.items()))


SPARK_DEFAULT_EXECUTOR_INSTANCES = 2
"""Spark's ``spark.executor.instances`` when none is set."""


def task_slots_per_executor(props: Any) -> int:
    """Tasks an executor runs at once: ``spark.executor.cores // spark.task.cpus`` (Spark's
    defaults 1 and 1), at least 1. ``props``: a ``{property: value}`` mapping or a ``SparkConf``."""
    return max(1, int(props.get("spark.executor.cores", "1")) // int(props.get("spark.task.cpus", "1")))


def dynamic_allocation(props: Any) -> bool:
    """Whether ``props`` (a mapping or a ``SparkConf``) turn Spark's dynamic allocation on."""
    return str(props.get("spark.dynamicAllocation.enabled", "false")).lower() == "true"


def _give_every_task_a_slot(props: dict[str, str], task_count: int) -> None:
    """Raise ``spark.executor.instances`` until the executors hold a slot per task: a task
    is a Spark job that never ends, so one without a slot would never be scheduled."""
    per_executor = task_slots_per_executor(props)
    needed = -(-task_count // per_executor)
    instances = int(props.get("spark.executor.instances", SPARK_DEFAULT_EXECUTOR_INSTANCES))
    if instances < needed:
        log.info("spark.executor.instances raised from %d to %d: %d task(s) need a slot each, and an executor "
                 "holds %d", instances, needed, task_count, per_executor)
        props["spark.executor.instances"] = str(needed)


def is_local_master(master: str) -> bool:
    """``local``, ``local[N]``, ``local[*]``, ``local[N,F]``: Spark inside this process."""
    return master == "local" or master.startswith("local[")


def local_task_slots(master: str) -> int | None:
    """The tasks a local master runs at once (``local`` 1, ``local[N]`` and ``local[N,F]`` N,
    ``local[*]`` the machine's cores); ``None`` for a cluster master, whose executors may grow."""
    if not is_local_master(master):
        return None
    match = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\d+)?\])?", master)
    if match is None or match.group(1) is None:
        return 1
    return (os.cpu_count() or 1) if match.group(1) == "*" else int(match.group(1))


def start_spark_session(props: Mapping[str, str]) -> Any:
    """A SparkSession with ``props`` (see :func:`spark_properties`), its JVM started with
    SIGTERM ignored (see :func:`_jvm_ignoring_sigterm`), log level WARN.

    Raises:
        Exception: whatever PySpark raises when the JVM or the master cannot be reached.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    ensure_passwd_entry()  # an arbitrary UID (OpenShift): the JVM's login needs a passwd entry
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in props.items():
        builder = builder.config(key, value)
    if is_local_master(props["spark.master"]):
        # Spark's own address lookup (and its "resolves to a loopback address" warning)
        # runs before it reads spark.driver.host; this keeps it on loopback too.
        os.environ.setdefault("SPARK_LOCAL_IP", props["spark.driver.bindAddress"])
    log.info("starting Spark: master %s, app %s", props["spark.master"], props["spark.app.name"])
    with _jvm_ignoring_sigterm():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


@contextmanager
def _jvm_ignoring_sigterm() -> Iterator[None]:
    """Start Spark's JVM with SIGTERM ignored, so that a SIGTERM sent to the whole process group
    (``timeout``, systemd, a terminal) reaches only this driver, which stops the tasks
    gracefully; the JVM exits when the driver does (PySpark's gateway watches stdin).

    The signal is ignored in the gateway's child process only, between fork and exec (an
    ignored signal survives exec, and the JVM then installs no handler for it): this process
    keeps its own SIGTERM handler all along, so a SIGTERM while Spark starts is never lost
    (issue 11 §1). PySpark's ``launch_gateway`` sets its own ``preexec_fn`` (SIGINT ignored),
    so its ``Popen`` is wrapped for the block to add SIGTERM to it.
    """
    from pyspark import java_gateway

    original = java_gateway.Popen

    def popen(command: Any, **kwargs: Any) -> Any:
        inner = kwargs.get("preexec_fn")

        def preexec() -> None:
            if inner is not None:
                inner()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

        kwargs["preexec_fn"] = preexec
        return original(command, **kwargs)

    java_gateway.Popen = popen
    try:
        yield
    finally:
        java_gateway.Popen = original


_EXECUTOR_POD = re.compile(r"-exec-(?P<id>[0-9]+)$")


def executor_id_of_pod(pod: str) -> str | None:
    """Spark's executor id of a Spark-on-Kubernetes executor pod, from its name
    (``<spark.kubernetes.executor.podNamePrefix>-exec-<id>``, Spark's naming), else None
    (the driver's pod, or a name Spark did not give)."""
    match = _EXECUTOR_POD.search(pod)
    return match.group("id") if match else None


def decommission_executor(spark: Any, executor_id: str, reason: str) -> bool:
    """Mark executor ``executor_id`` as decommissioning in the driver's scheduler, so that no
    task is scheduled on it any more (Spark's ``ExecutorAllocationClient.decommissionExecutor``;
    the executor is not replaced until it is gone, when Spark asks for a new pod as for any
    lost executor). Called by the thread that drains a pod, before its tasks are relaunched.

    Returns:
        True if Spark acknowledged it; False on a local master, for an executor Spark does not
        know (already gone) or when the call failed (logged: the drain goes on without it).
    """
    if is_local_master(spark.sparkContext.master):
        return False
    try:
        jvm = spark.sparkContext._jvm
        backend = spark.sparkContext._jsc.sc().schedulerBackend()
        info = jvm.org.apache.spark.scheduler.ExecutorDecommissionInfo(reason, jvm.scala.Option.apply(None))
        done = bool(backend.decommissionExecutor(executor_id, info, False, False))
    except Exception:  # noqa: BLE001 - a Spark internal: never let it fail a drain
        log.exception("could not decommission executor %s", executor_id)
        return False
    log.info("executor %s decommissioned (%s): no new task goes there", executor_id, reason)
    return done
