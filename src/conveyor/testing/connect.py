"""A real Apache Kafka Connect distributed worker beside Conveyor, for tests.

The worker runs from the Apache Kafka Connect jars on Maven Central (``connect-runtime``,
``connect-file``, ``connect-json``, the same version as the broker, with the broker's log4j2
logging). They are resolved once with ``mvn dependency:copy-dependencies`` into
``<cache>/kafka-connect-<version>/libs`` (``<cache>`` is ``$CONVEYOR_CACHE_DIR`` or
``~/.cache/conveyor``) and reused by every later run.

Typical use::

    from conveyor.testing.connect import ConnectWorker

    with ConnectWorker(kafka.bootstrap_servers) as worker:    # waits until it has joined its group
        worker.put_connector("c1", {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                                    "topics": "t1", "file": "/tmp/out.txt"})
        worker.wait_for_state("c1", "RUNNING")
        status, body, headers = worker.rest("GET", "/connectors/c1/offsets")

The worker's REST listener is on a free ``127.0.0.1`` port; its group, its internal topics and
its logs are its own (the topics default to names derived from the group id, unique per worker
unless a ``group_id`` is given). Plugins are found through their ``META-INF/services`` manifests
(``plugin.discovery=service_load``), which lists the FileStream connectors, the built-in
transforms, predicates and converters without scanning every jar.

Every failure to resolve, start or reach the worker raises
:class:`~conveyor.testing.errors.ComponentUnavailable` (component ``"kafka-connect"``) with the
reason and the last lines of the worker log.
"""

from __future__ import annotations

import http.client
import json
import logging
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from conveyor.testing import _support
from conveyor.testing.kafka import KAFKA_VERSION
from conveyor.testing.managed_server import ManagedServer
from conveyor.testing.maven import classpath_pom, resolve_libs

__all__ = [
    "JSON_CONVERTER",
    "ConnectRestError",
    "ConnectWorker",
    "connect_libs",
    "render_pom",
]

log = logging.getLogger("conveyor.testing.connect")

COMPONENT = "kafka-connect"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"

# Worker log: INFO for Connect itself (connector and task lifecycle, REST errors), WARN for the
# clients. Goes to stdout, which the harness redirects into <workdir>/connect.log.
_LOG4J2_PROPERTIES = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
logger.common.name = org.apache.kafka.common
logger.common.level = WARN
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
logger.jetty.name = org.eclipse.jetty
logger.jetty.level = WARN
"""


# --------------------------------------------------------------------------------------------
# jars


def _connect_dir(version: str) -> Path:
    return _support.cache_root() / f"kafka-connect-{version}"


def render_pom(version: str = KAFKA_VERSION) -> str:
    """The Maven POM whose runtime dependencies are the Connect worker's classpath."""
    return classpath_pom("kafka-connect-classpath", version,
                         [("org.apache.kafka", artifact, version)
                          for artifact in ("connect-runtime", "connect-file", "connect-json")],
                         "the runtime classpath of an Apache Kafka Connect worker.")


def connect_libs(version: str = KAFKA_VERSION, *, timeout: float = 1800.0) -> Path:
    """Directory holding every jar of the Kafka Connect ``version`` worker; resolved on first use.

    Like :func:`conveyor.testing.kafka.kafka_libs`: the first call runs ``mvn -q -B
    dependency:copy-dependencies`` (needs ``mvn``, Java and Maven Central, or a populated
    ``~/.m2``), later calls return the cached directory at once; safe against concurrent callers.

    Args:
        version: Apache Kafka version.
        timeout: seconds allowed for Maven.

    Returns:
        ``<cache>/kafka-connect-<version>/libs``.

    Raises:
        ComponentUnavailable: mvn is missing or the resolution failed.
    """
    return resolve_libs(
        _connect_dir(version), render_pom(version), f"connect-runtime-{version}.jar",
        component=COMPONENT, what=f"Apache Kafka Connect {version}", timeout=timeout,
    )


class OracleFailed(RuntimeError):
    """A Java oracle program exited with an error or answered fewer lines than it was asked."""


def run_oracle(source: Path, requests: list[str], needs_jar: str, timeout_s: float = 300.0) -> list[Any]:
    """Run the single-file Java program ``source`` (``java <file>.java``) on the Kafka Connect
    worker's classpath, in UTC and the ``en_US`` locale, one request per line on its stdin.

    Args:
        needs_jar: the start of a jar's name the program needs (``connect-transforms-``).

    Returns:
        Its answers: one JSON document per line of its stdout, in the order of ``requests``.

    Raises:
        ComponentUnavailable: the jars or a Java 17+ are not there.
        OracleFailed: no jar named ``needs_jar*``, a non-zero exit, or fewer answers than
            requests (the message ends with its stderr's last 4,000 characters).
    """
    libs = connect_libs()
    java = _support.find_java_home(17, component=COMPONENT) / "bin" / "java"
    jars = sorted(str(p) for p in libs.glob("*.jar"))
    if not any(Path(j).name.startswith(needs_jar) for j in jars):
        raise OracleFailed(f"no {needs_jar}* jar in {libs}; delete the directory to have it resolved again")
    run = subprocess.run(
        [str(java), "-Duser.timezone=UTC", "-Duser.language=en", "-Duser.country=US", "-cp", ":".join(jars),
         str(source)],
        input="\n".join(requests) + "\n", capture_output=True, encoding="utf-8", timeout=timeout_s, check=False)
    answers = [json.loads(line) for line in run.stdout.splitlines()]
    if run.returncode != 0 or len(answers) != len(requests):
        raise OracleFailed(f"{source.name} exited {run.returncode} with {len(answers)} of {len(requests)} answers:\n"
                           f"{run.stderr[-4000:]}")
    return answers


# --------------------------------------------------------------------------------------------
# worker


class ConnectRestError(RuntimeError):
    """A Connect REST call answered with an unexpected status.

    Attributes:
        method, path: the request.
        status: the HTTP status.
        body: the parsed JSON body (or text).
    """

    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        self.method, self.path, self.status, self.body = method, path, status, body
        super().__init__(f"{method} {path} -> {status}: {body}")


class ConnectWorker(ManagedServer):
    """A real Apache Kafka Connect worker in distributed mode (``ConnectDistributed``).

    Args:
        bootstrap_servers: the Kafka cluster (``host:port[,host:port]``).
        group_id: the worker group (default ``conveyor-connect-<random>``).
        config_storage_topic, offset_storage_topic, status_storage_topic: the internal topics
            (default ``<group_id>-configs`` / ``-offsets`` / ``-status``). An existing offsets
            topic must be compacted (Connect refuses to start otherwise).
        extra_properties: extra/overriding worker properties (e.g.
            ``{"value.converter.schemas.enable": "true"}``).
        version: Apache Kafka Connect version (jars from Maven Central, see :func:`connect_libs`).
        heap: JVM heap (``-Xmx``).
        startup_timeout: seconds to wait until the REST API answers and the worker has joined.
        host: the address the REST listener binds and advertises.

    Raises (from :meth:`start`):
        ComponentUnavailable: Java/Maven missing, jar resolution or startup failed.
    """

    log_name = "connect.log"
    process_name = "worker process"
    stop_grace_s = 30.0
    component = COMPONENT

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        group_id: str | None = None,
        config_storage_topic: str | None = None,
        offset_storage_topic: str | None = None,
        status_storage_topic: str | None = None,
        extra_properties: Mapping[str, str] | None = None,
        version: str = KAFKA_VERSION,
        heap: str = "256m",
        startup_timeout: float = 120.0,
        host: str = _support.LOOPBACK,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers.strip()
        self.group_id = group_id or f"conveyor-connect-{uuid.uuid4().hex[:8]}"
        self.config_storage_topic = config_storage_topic or f"{self.group_id}-configs"
        self.offset_storage_topic = offset_storage_topic or f"{self.group_id}-offsets"
        self.status_storage_topic = status_storage_topic or f"{self.group_id}-status"
        self.extra_properties = {k: str(v) for k, v in (extra_properties or {}).items()}
        self.version = version
        self.heap = heap
        self.host = host
        self._init_server(startup_timeout)
        #: seconds from launching the JVM to the first ``GET /`` answering 200 (``ready_seconds``), and to
        #: having joined.
        self.joined_seconds: float | None = None

    # -- public ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` of the REST API."""
        if not self.port:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return f"http://{self.host}:{self.port}"

    def worker_properties(self) -> dict[str, str]:
        """The worker's properties file (needs the port assigned)."""
        assert self.port
        props = {
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": self.group_id,
            "config.storage.topic": self.config_storage_topic,
            "offset.storage.topic": self.offset_storage_topic,
            "status.storage.topic": self.status_storage_topic,
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "key.converter": JSON_CONVERTER,
            "value.converter": JSON_CONVERTER,
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
            "listeners": f"http://{self.host}:{self.port}",
            "rest.advertised.host.name": self.host,
            "rest.advertised.port": str(self.port),
            "rest.advertised.listener": "http",
            "offset.flush.interval.ms": "1000",
            "plugin.discovery": "service_load",
        }
        props.update(self.extra_properties)
        return props

    def start(self) -> ConnectWorker:
        """Resolve the jars if needed, start the worker, wait until it has joined its group.

        Retries with a new port (up to 3 attempts) if the port was taken in between.

        Returns:
            self.

        Raises:
            ComponentUnavailable: see the class docstring.
        """
        if self._proc is not None:
            return self
        libs = connect_libs(self.version)
        java_home = _support.find_java_home(17, component=COMPONENT)
        self._start_with_port_retries(lambda: self._start_once(java_home / "bin" / "java", libs),
                                      "Address already in use")
        return self

    def stop(self) -> None:
        """Stop the worker (SIGTERM, then SIGKILL after 30 s) and remove its temp dir. Idempotent."""
        self._kill()
        self._discard()

    def __repr__(self) -> str:
        return f"ConnectWorker(version={self.version!r}, url={self._url_or_none()!r}, pid={self.pid})"

    # -- REST --------------------------------------------------------------------------------

    def rest(
        self,
        method: str,
        path: str,
        json_body: Any = None,
        raw_body: str | bytes | None = None,
        *,
        timeout: float = 60.0,
    ) -> tuple[int, Any, dict[str, str]]:
        """One request to the worker's REST API.

        Args:
            method: ``GET``, ``PUT``, ``PATCH``...
            path: e.g. ``/connectors/c1/status?x=y`` (not encoded here).
            json_body: sent as JSON (``Content-Type: application/json``) unless None.
            raw_body: sent as is with ``Content-Type: application/json`` (malformed bodies).
            timeout: socket timeout in seconds (Connect answers within 90 s or with a 500).

        Returns:
            ``(status, body, headers)``: the body parsed as JSON when it is JSON, else the text
            (``None`` when empty); the headers with lower-case names.
        """
        status, text, headers = self.rest_text(method, path, json_body, raw_body, timeout=timeout)
        body: Any = text or None
        if text:
            try:
                body = json.loads(text)
            except ValueError:
                pass
        return status, body, headers

    def rest_text(
        self,
        method: str,
        path: str,
        json_body: Any = None,
        raw_body: str | bytes | None = None,
        *,
        timeout: float = 60.0,
    ) -> tuple[int, str, dict[str, str]]:
        """:meth:`rest` without parsing: ``(status, the body's exact text, headers)``."""
        if not self.port:
            raise RuntimeError(f"{type(self).__name__} is not started")
        headers = {"Accept": "application/json"}
        data: bytes | None = None
        if raw_body is not None:
            data = raw_body.encode() if isinstance(raw_body, str) else raw_body
        elif json_body is not None:
            data = json.dumps(json_body).encode()
        if data is not None:
            headers["Content-Type"] = "application/json"
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
            return resp.status, raw.decode("utf-8", "replace"), {k.lower(): v for k, v in resp.getheaders()}
        finally:
            conn.close()

    def put_connector(self, name: str, config: Mapping[str, str]) -> dict:
        """Create or reconfigure connector ``name`` (``PUT /connectors/<name>/config``).

        Returns:
            the worker's answer (``{"name", "config", "tasks", "type"}``).

        Raises:
            ConnectRestError: the worker answered neither 200 nor 201.
        """
        path = f"/connectors/{quote(name, safe='')}/config"
        status, body, _ = self.rest("PUT", path, json_body=dict(config))
        if status not in (200, 201):
            raise ConnectRestError("PUT", path, status, body)
        return body

    def delete_connector(self, name: str) -> None:
        """``DELETE /connectors/<name>``; a connector that does not exist is fine."""
        path = f"/connectors/{quote(name, safe='')}"
        status, body, _ = self.rest("DELETE", path)
        if status not in (204, 404):
            raise ConnectRestError("DELETE", path, status, body)

    def wait_for_state(self, name: str, state: str, timeout: float = 60.0, *, min_tasks: int | None = None) -> dict:
        """Poll ``GET /connectors/<name>/status`` until the connector and each of its tasks are in ``state``.

        Args:
            name: the connector.
            state: ``RUNNING``, ``PAUSED``, ``STOPPED``, ``FAILED``...
            timeout: seconds.
            min_tasks: tasks the status must list (default 1 for ``RUNNING``/``PAUSED``, else 0).

        Returns:
            the last status body.

        Raises:
            TimeoutError: not reached within ``timeout`` (with the last status), or the connector
                or a task FAILED while another state was awaited.
        """
        want_tasks = (1 if state in ("RUNNING", "PAUSED") else 0) if min_tasks is None else min_tasks
        path = f"/connectors/{quote(name, safe='')}/status"
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            self._check_alive()
            status, body, _ = self.rest("GET", path, timeout=max(1.0, min(30.0, deadline - time.monotonic())))
            last = (status, body)
            if status == 200:
                states = [body["connector"]["state"], *(t["state"] for t in body.get("tasks", []))]
                if all(s == state for s in states) and len(states) - 1 >= want_tasks:
                    return body
                if state != "FAILED" and "FAILED" in states:
                    raise TimeoutError(f"connector {name!r} failed while waiting for {state}: {body}")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"connector {name!r} not {state} within {timeout:.0f}s; last status: {last}")
            time.sleep(0.2)

    # -- internals ---------------------------------------------------------------------------

    def _url_or_none(self) -> str | None:
        return f"http://{self.host}:{self.port}" if self.port else None

    def _start_once(self, java: Path, libs: Path) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="conveyor-connect-"))
        self.port = _support.free_port(self.host)
        props_file = self.workdir / "worker.properties"
        props_file.write_text("".join(f"{k}={v}\n" for k, v in self.worker_properties().items()))
        log4j = self.workdir / "log4j2.properties"
        log4j.write_text(_LOG4J2_PROPERTIES)
        cmd = [
            *_support.pdeathsig_prefix("KILL"), str(java),
            f"-Xmx{self.heap}", f"-Dlog4j2.configurationFile={log4j}", "-Djava.awt.headless=true",
            "-cp", f"{libs}/*", "org.apache.kafka.connect.cli.ConnectDistributed", str(props_file),
        ]
        started = time.monotonic()
        with open(self.workdir / self.log_name, "wb") as out:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.workdir, start_new_session=True,
            )
        self._record = _support.register_child("kafka-connect", self._proc.pid, self.workdir)
        _support.track(self)
        self._wait_ready(started)
        log.info("kafka connect %s ready at %s in %.1fs, joined group %s in %.1fs (pid %s, %s)", self.version,
                 self.url, self.ready_seconds, self.group_id, self.joined_seconds, self._proc.pid, self.workdir)

    def _wait_ready(self, started: float) -> None:
        """Wait until ``GET /`` answers 200, then until ``GET /connectors`` does (the herder has joined)."""
        deadline = started + self.startup_timeout
        last_error = "no answer"
        path = "/"
        while True:
            self._check_alive()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._unavailable(f"GET {path} did not answer 200 within {self.startup_timeout:.0f}s "
                                        f"(last: {last_error})")
            if _support.port_open(self.host, self.port):
                try:
                    status, body, _ = self.rest("GET", path, timeout=max(0.5, min(10.0, remaining)))
                    if status == 200:
                        if path == "/":
                            self.ready_seconds = time.monotonic() - started
                            path = "/connectors"
                            continue
                        self.joined_seconds = time.monotonic() - started
                        return
                    last_error = f"{status} {body}"
                except (OSError, http.client.HTTPException) as e:
                    last_error = str(e) or type(e).__name__
            else:
                last_error = "connection refused"
            time.sleep(0.2)

    def _where(self) -> str:
        return (f"Apache Kafka Connect {self.version} worker at {self._url_or_none()} "
                f"(bootstrap {self.bootstrap_servers})")
