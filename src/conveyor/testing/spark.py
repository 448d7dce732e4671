"""An in-process local Spark for tests.

``local_spark_session(cores=8)`` returns a ``pyspark.sql.SparkSession`` on ``local[cores]``,
bound to 127.0.0.1, without UI, with few shuffle partitions and with Spark's own logging turned
down to errors. PySpark 4 needs Java 17+: ``JAVA_HOME`` is detected when unset (see
:func:`conveyor.testing._support.find_java_home`) and exported to this process's environment,
since PySpark starts its JVM from it. Python workers run with this interpreter
(``PYSPARK_PYTHON`` defaults to ``sys.executable``), so they see the same packages.

Missing pyspark or Java, or a JVM that fails to start, raises
:class:`~conveyor.testing.errors.ComponentUnavailable` (component ``"spark"``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from conveyor.testing import _support
from conveyor.testing.errors import ComponentUnavailable

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["local_spark_session"]

# Spark's JVM log: errors only, and not even those from the chattiest startup loggers.
_LOG4J2_PROPERTIES = """\
status = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n%ex
rootLogger.level = error
rootLogger.appenderRef.stdout.ref = console
logger.nativeloader.name = org.apache.hadoop.util.NativeCodeLoader
logger.nativeloader.level = off
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
# the "shell" logger of PySpark's gateway: at the root level, Spark prints no "Setting default
# log level" banner
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""


def _log4j_config() -> Path:
    path = _support.cache_root() / "spark-log4j2.properties"
    if not path.exists() or path.read_text() != _LOG4J2_PROPERTIES:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J2_PROPERTIES)
        tmp.replace(path)
    return path


def local_spark_session(
    cores: int = 8,
    *,
    app_name: str = "conveyor-tests",
    conf: Mapping[str, str] | None = None,
    shuffle_partitions: int = 4,
) -> SparkSession:
    """Start (or return the already active) local SparkSession.

    Args:
        cores: worker threads, i.e. ``master=local[cores]``; may exceed the machine's cores (a
            task per long-running connector task needs a slot, not a CPU).
        app_name: Spark application name.
        conf: extra Spark settings, applied last.
        shuffle_partitions: ``spark.sql.shuffle.partitions`` (Spark's default 200 is slow in tests).

    Returns:
        The SparkSession. Stop it with ``spark.stop()``. If a session is already active in this
        process it is returned as is, and static settings here do not apply to it.

    Raises:
        ComponentUnavailable: pyspark not installed, no Java 17+, or the JVM failed to start.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise ComponentUnavailable(
            "spark", f"pyspark cannot be imported: {e}", hint="pip install 'conveyor[spark]'"
        ) from None
    java_home = _support.find_java_home(17, component="spark")
    os.environ.setdefault("JAVA_HOME", str(java_home))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", _support.LOOPBACK)

    java_opts = f"-Dlog4j2.configurationFile=file:{_log4j_config()} -Djava.awt.headless=true"
    warehouse = tempfile.mkdtemp(prefix="conveyor-spark-warehouse-")
    atexit.register(shutil.rmtree, warehouse, True)
    settings = {
        "spark.master": f"local[{int(cores)}]",
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": _support.LOOPBACK,
        "spark.driver.bindAddress": _support.LOOPBACK,
        "spark.sql.shuffle.partitions": str(int(shuffle_partitions)),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.warehouse.dir": warehouse,
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
    }
    settings.update(conf or {})
    builder = SparkSession.builder
    for k, v in settings.items():
        builder = builder.config(k, v)
    try:
        spark = builder.getOrCreate()
    except Exception as e:  # noqa: BLE001 - py4j / gateway errors have no common base class
        raise ComponentUnavailable(
            "spark", f"could not start a local SparkSession: {type(e).__name__}: {e}",
            hint=f"JAVA_HOME={os.environ.get('JAVA_HOME')}; PySpark 4 needs Java 17+",
        ) from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark
