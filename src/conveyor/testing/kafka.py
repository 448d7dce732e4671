"""A real, single-node Apache Kafka broker (KRaft, broker+controller) for tests.

The broker runs from the Apache Kafka jars on Maven Central. They are resolved once with
``mvn dependency:copy-dependencies`` into ``<cache>/kafka-<version>/libs`` (``<cache>`` is
``$CONVEYOR_CACHE_DIR`` or ``~/.cache/conveyor``) and reused by every later run.

Typical use::

    from conveyor.testing.kafka import KafkaBroker

    with KafkaBroker() as kafka:                    # starts it, waits until it serves metadata
        topic = kafka.create_topic("orders", partitions=3)
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})

:func:`start_or_reuse` returns an :class:`ExternalKafka` for ``$CONVEYOR_KAFKA_BOOTSTRAP`` when
that is set, else a freshly started :class:`KafkaBroker`. Both have the same interface
(:class:`KafkaEndpoint`).

A started broker also has a ``SASL_PLAINTEXT`` listener with mechanism ``PLAIN``
(:meth:`KafkaEndpoint.sasl_plain`), for tests of authenticated clients; its users are
:data:`SASL_PLAIN_USERS`.

Every failure to resolve, format, start or reach a broker raises
:class:`~conveyor.testing.errors.ComponentUnavailable` (component ``"kafka"``) with the reason
and the last lines of the broker log.
"""

from __future__ import annotations

import base64
import logging
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from conveyor.testing import _support
from conveyor.testing.errors import ComponentUnavailable, Endpoint, reuse_or_start
from conveyor.testing.managed_server import ManagedServer
from conveyor.testing.maven import classpath_pom, resolve_libs

__all__ = [
    "ENV_BOOTSTRAP",
    "ENV_SASL_BOOTSTRAP",
    "KAFKA_VERSION",
    "SASL_PLAIN_USERS",
    "ExternalKafka",
    "KafkaBroker",
    "KafkaEndpoint",
    "SaslListener",
    "kafka_libs",
    "start_or_reuse",
]

log = logging.getLogger("conveyor.testing.kafka")

#: Apache Kafka version the harness runs (Scala 2.13 build).
KAFKA_VERSION = "4.1.1"
SCALA_BINARY_VERSION = "2.13"
#: Environment variable naming an already running broker to reuse (``host:port[,host:port]``).
ENV_BOOTSTRAP = "CONVEYOR_KAFKA_BOOTSTRAP"
#: With :data:`ENV_BOOTSTRAP`: ``host:port`` of the reused broker's SASL_PLAINTEXT listener
#: (mechanism PLAIN, accepting the users of :data:`SASL_PLAIN_USERS`).
ENV_SASL_BOOTSTRAP = "CONVEYOR_KAFKA_SASL_BOOTSTRAP"
#: ``{username: password}`` the harness broker's SASL_PLAINTEXT/PLAIN listener accepts.
SASL_PLAIN_USERS: Mapping[str, str] = {"admin": "admin-secret", "conveyor": "conveyor-secret"}

# Broker log: INFO for the broker's own lifecycle, WARN for the chatty internals. Goes to stdout,
# which the harness redirects into <workdir>/broker.log.
_LOG4J2_PROPERTIES = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.clients.name = org.apache.kafka
logger.clients.level = WARN
logger.raft.name = org.apache.kafka.raft
logger.raft.level = WARN
logger.logcleaner.name = kafka.log.LogCleaner
logger.logcleaner.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
logger.coordinator.name = kafka.coordinator
logger.coordinator.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


# --------------------------------------------------------------------------------------------
# jars


def _kafka_dir(version: str) -> Path:
    return _support.cache_root() / f"kafka-{version}"


def render_pom(version: str = KAFKA_VERSION) -> str:
    """The Maven POM whose runtime dependencies are the broker's classpath."""
    return classpath_pom("kafka-broker-classpath", version,
                         [("org.apache.kafka", f"kafka_{SCALA_BINARY_VERSION}", version)],
                         "the runtime classpath of an Apache Kafka broker.")


def kafka_libs(version: str = KAFKA_VERSION, *, timeout: float = 1800.0) -> Path:
    """Directory holding every jar of the Kafka ``version`` broker; resolved on first use.

    The first call runs ``mvn -q -B dependency:copy-dependencies -DincludeScope=runtime`` (needs
    ``mvn``, Java and network access to Maven Central, or a populated ``~/.m2``); later calls
    return the cached directory at once. Safe against concurrent callers (file lock) and against
    a resolution that crashed half-way (the directory only appears once complete).

    Args:
        version: Apache Kafka version (Scala 2.13 build).
        timeout: seconds allowed for Maven.

    Returns:
        ``<cache>/kafka-<version>/libs``.

    Raises:
        ComponentUnavailable: mvn is missing or the resolution failed.
    """
    return resolve_libs(
        _kafka_dir(version), render_pom(version), f"kafka_{SCALA_BINARY_VERSION}-{version}.jar",
        component="kafka", what=f"Apache Kafka {version}", timeout=timeout,
    )


def _random_cluster_id() -> str:
    """A Kafka cluster id, as ``kafka-storage random-uuid`` makes: base64url of 16 random bytes."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):  # Kafka's Uuid.randomUuid() avoids these too (CLI parsing)
            return cid


# --------------------------------------------------------------------------------------------
# endpoints


@dataclass(frozen=True)
class SaslListener:
    """A listener that wants SASL authentication (``SASL_PLAINTEXT``).

    Attributes:
        bootstrap_servers: ``host:port`` of the listener.
        mechanism: librdkafka's ``sasl.mechanism``, e.g. ``"PLAIN"``.
        users: ``{username: password}`` it accepts.
    """

    bootstrap_servers: str
    mechanism: str
    users: Mapping[str, str]

    def client_properties(self, username: str = "conveyor", password: str | None = None) -> dict[str, str]:
        """librdkafka properties of a client authenticating as ``username`` (with its
        password from :attr:`users` unless ``password`` is given)."""
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": self.mechanism,
            "sasl.username": username,
            "sasl.password": self.users[username] if password is None else password,
        }


class KafkaEndpoint(Endpoint):
    """A reachable Kafka cluster and a few admin helpers. Base of KafkaBroker and ExternalKafka.

    Usable as a context manager: ``__exit__`` calls :meth:`stop`.
    """

    component = "kafka"

    _bootstrap: str | None = None
    _admin = None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port[,host:port]`` for the ``bootstrap.servers`` client setting."""
        if not self._bootstrap:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._bootstrap

    def admin(self):
        """A cached ``confluent_kafka.admin.AdminClient`` for this cluster."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "logger": log})
        return self._admin

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        config: Mapping[str, str] | None = None,
        *,
        replication_factor: int = 1,
        timeout: float = 30.0,
    ) -> str:
        """Create topic ``name`` and wait until every partition has a leader.

        Args:
            name: topic name.
            partitions: number of partitions (>= 1).
            config: topic-level configs, e.g. ``{"cleanup.policy": "compact"}``.
            replication_factor: 1 on the harness broker.
            timeout: seconds for creation plus metadata propagation.

        Returns:
            ``name``.

        Raises:
            confluent_kafka.KafkaException: the broker rejected the creation (e.g. it exists).
            TimeoutError: the partitions did not get leaders within ``timeout``.
        """
        from confluent_kafka.admin import NewTopic

        deadline = time.monotonic() + timeout
        new = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                       config=dict(config or {}))
        self.admin().create_topics([new], request_timeout=timeout)[name].result(timeout=timeout)
        while True:
            remaining = deadline - time.monotonic()
            md = self.admin().list_topics(topic=name, timeout=max(1.0, remaining))
            t = md.topics.get(name)
            if (
                t is not None and t.error is None and len(t.partitions) == partitions
                and all(p.leader >= 0 and p.error is None for p in t.partitions.values())
            ):
                return name
            if remaining <= 0:
                raise TimeoutError(f"topic {name!r} has no leader for every partition after {timeout:.0f}s")
            time.sleep(0.1)

    def sasl_plain(self) -> SaslListener:
        """The cluster's SASL_PLAINTEXT listener with mechanism PLAIN.

        Raises:
            ComponentUnavailable: the cluster has none the harness knows of.
        """
        raise ComponentUnavailable("kafka", f"{self!r} has no known SASL_PLAINTEXT listener")

    def delete_topic(self, name: str, *, timeout: float = 30.0) -> None:
        """Delete topic ``name`` and wait for the broker's acknowledgement.

        Raises:
            confluent_kafka.KafkaException: the broker refused (e.g. unknown topic).
        """
        self.admin().delete_topics([name], request_timeout=timeout)[name].result(timeout=timeout)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until the cluster answers a metadata request listing at least one broker.

        Raises:
            ComponentUnavailable: not ready within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        last_error = "no answer"
        while True:
            self._check_alive()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._unavailable(f"no metadata from {self.bootstrap_servers} within {timeout:.0f}s "
                                        f"(last error: {last_error})")
            if self._first_host_reachable():
                try:
                    md = self.admin().list_topics(timeout=min(5.0, max(0.5, remaining)))
                    if md.brokers:
                        return
                    last_error = "metadata lists no broker yet"
                except Exception as e:  # noqa: BLE001 - KafkaException and friends, retried
                    last_error = str(e)
            else:
                last_error = "connection refused"
            time.sleep(0.2)

    def _first_host_reachable(self) -> bool:
        for hp in self.bootstrap_servers.split(","):
            host, _, port = hp.strip().rpartition(":")
            host = host.split("://")[-1].strip("[]")
            if port.isdigit() and _support.port_open(host or _support.LOOPBACK, int(port)):
                return True
        return False

    def stop(self) -> None:
        """Release client resources (and, for a started broker, stop it). Idempotent."""
        self._admin = None


class ExternalKafka(KafkaEndpoint):
    """A Kafka cluster someone else runs (e.g. ``$CONVEYOR_KAFKA_BOOTSTRAP``); never stopped by us.

    Args:
        bootstrap_servers: ``host:port[,host:port]``.
        sasl_bootstrap_servers: ``host:port`` of its SASL_PLAINTEXT listener with mechanism
            PLAIN accepting :data:`SASL_PLAIN_USERS` (``$CONVEYOR_KAFKA_SASL_BOOTSTRAP``), if any.
    """

    def __init__(self, bootstrap_servers: str, sasl_bootstrap_servers: str | None = None) -> None:
        self._bootstrap = bootstrap_servers.strip()
        self._sasl_bootstrap = (sasl_bootstrap_servers or "").strip() or None

    def sasl_plain(self) -> SaslListener:
        """The SASL_PLAINTEXT/PLAIN listener given at construction (``$CONVEYOR_KAFKA_SASL_BOOTSTRAP``).

        Raises:
            ComponentUnavailable: none was given.
        """
        if not self._sasl_bootstrap:
            raise ComponentUnavailable(
                "kafka",
                f"the reused broker {ENV_BOOTSTRAP}={self._bootstrap} has no known SASL_PLAINTEXT listener",
                hint=f"set {ENV_SASL_BOOTSTRAP}=host:port of a SASL_PLAINTEXT/PLAIN listener accepting the users of "
                     f"conveyor.testing.kafka.SASL_PLAIN_USERS, or unset {ENV_BOOTSTRAP} to let the harness start a "
                     "broker",
            )
        return SaslListener(self._sasl_bootstrap, "PLAIN", dict(SASL_PLAIN_USERS))

    def _unavailable(self, reason: str) -> ComponentUnavailable:
        return ComponentUnavailable(
            "kafka",
            f"the reused broker {ENV_BOOTSTRAP}={self._bootstrap} is not reachable: {reason}",
            hint=f"unset {ENV_BOOTSTRAP} to let the harness start a broker, or start one with "
                 "`python -m conveyor.testing up --kafka`",
        )

    def __repr__(self) -> str:
        return f"ExternalKafka({self._bootstrap!r})"


class KafkaBroker(ManagedServer, KafkaEndpoint):
    """A real single-node Apache Kafka broker in KRaft mode (``process.roles=broker,controller``).

    Listens on free ports of ``host`` only (127.0.0.1 by default; a PLAINTEXT client listener, a SASL_PLAINTEXT
    client listener with mechanism PLAIN and the users of :data:`SASL_PLAIN_USERS` unless
    ``sasl_plain`` is false, and a controller listener), keeps its data in a fresh temp dir
    removed by :meth:`stop`, and is configured for one node (internal topics with replication factor 1, ``transaction.state.log.min.isr=1``,
    ``group.initial.rebalance.delay.ms=0``; KIP-848 groups' session 6 s and heartbeats 1.5 s, as
    the runtime sets for classic groups). Topic auto-creation keeps Kafka's default (on).

    Args:
        version: Apache Kafka version (jars from Maven Central, see :func:`kafka_libs`).
        heap: JVM heap (``-Xmx``), e.g. ``"1g"``.
        config: extra/overriding ``server.properties`` entries.
        startup_timeout: seconds to wait for the broker to serve metadata.
        sasl_plain: add the SASL_PLAINTEXT/PLAIN listener (inline JAAS users, no authorizer:
            an authenticated user may do anything).
        host: the address every listener binds and advertises (a test node's IP, so that
            pods reach the broker).
        extra_sasl_users: ``{username: password}`` the SASL listener accepts besides
            :data:`SASL_PLAIN_USERS` (a canary password, say).

    Raises (from :meth:`start`):
        ComponentUnavailable: Java/Maven missing, jar resolution, storage format or startup failed.
    """

    log_name = "broker.log"
    process_name = "broker process"
    stop_grace_s = 30.0

    def __init__(
        self,
        *,
        version: str = KAFKA_VERSION,
        heap: str = "1g",
        config: Mapping[str, str] | None = None,
        startup_timeout: float = 60.0,
        sasl_plain: bool = True,
        host: str = _support.LOOPBACK,
        extra_sasl_users: Mapping[str, str] | None = None,
    ) -> None:
        self.host = host
        self.sasl_users = {**SASL_PLAIN_USERS, **(extra_sasl_users or {})}
        self.version = version
        self.sasl_enabled = sasl_plain
        self.sasl_port: int | None = None
        self.heap = heap
        self.config = dict(config or {})
        self.controller_port: int | None = None
        self._init_server(startup_timeout)

    # -- public ------------------------------------------------------------------------------

    def sasl_plain(self) -> SaslListener:
        """The SASL_PLAINTEXT/PLAIN listener (users :data:`SASL_PLAIN_USERS` and ``extra_sasl_users``).

        Raises:
            ComponentUnavailable: the broker was started with ``sasl_plain=False`` or is not running.
        """
        if not self.sasl_enabled or not self.sasl_port or not self._bootstrap:
            raise ComponentUnavailable("kafka", f"{self!r} has no SASL_PLAINTEXT listener")
        return SaslListener(f"{self.host}:{self.sasl_port}", "PLAIN", dict(self.sasl_users))

    def start(self) -> KafkaBroker:
        """Resolve the jars if needed, format storage, start the broker, wait until ready.

        Retries with new ports (up to 3 attempts) if a port was taken in between.

        Returns:
            self.

        Raises:
            ComponentUnavailable: see the class docstring.
        """
        if self._proc is not None:
            return self
        libs = kafka_libs(self.version)
        java_home = _support.find_java_home(17, component="kafka")
        self._start_with_port_retries(lambda: self._start_once(java_home / "bin" / "java", libs),
                                      "Address already in use")
        return self

    def stop(self) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after 30 s) and remove its temp dir. Idempotent."""
        super().stop()
        self._kill()
        self._discard()
        self._bootstrap = None

    def __repr__(self) -> str:
        return f"KafkaBroker(version={self.version!r}, bootstrap={self._bootstrap!r}, pid={self.pid})"

    # -- internals ---------------------------------------------------------------------------

    def server_properties(self) -> dict[str, str]:
        """The broker's ``server.properties`` (needs ports and workdir assigned)."""
        assert self.workdir and self.port and self.controller_port
        host = self.host
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{host}:{self.port},CONTROLLER://{host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{host}:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "10",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "10",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # KIP-848 groups (group.protocol=consumer) take their session and heartbeats from the
            # broker: the 6 s / 1.5 s the runtime sets for classic groups (default 45 s / 5 s).
            "group.consumer.min.session.timeout.ms": "6000",
            "group.consumer.session.timeout.ms": "6000",
            "group.consumer.min.heartbeat.interval.ms": "500",
            "group.consumer.heartbeat.interval.ms": "1500",
            "transaction.max.timeout.ms": "900000",  # Kafka's default, stated explicitly
        }
        if self.sasl_enabled and self.sasl_port:  # assigned by start() with the other ports
            sasl = f"SASL_PLAINTEXT://{host}:{self.sasl_port}"
            props["listeners"] += f",{sasl}"
            props["advertised.listeners"] += f",{sasl}"
            props["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
            props["sasl.enabled.mechanisms"] = "PLAIN"
            users = " ".join(f'user_{u}="{p}"' for u, p in self.sasl_users.items())
            props["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="admin" password="{SASL_PLAIN_USERS["admin"]}" {users};'
            )
        props.update(self.config)
        return props

    def _start_once(self, java: Path, libs: Path) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="conveyor-kafka-"))
        self.port = _support.free_port(self.host)
        self.controller_port = _support.free_port(self.host)
        while self.controller_port == self.port:
            self.controller_port = _support.free_port(self.host)
        if self.sasl_enabled:
            self.sasl_port = _support.free_port(self.host)
            while self.sasl_port in (self.port, self.controller_port):
                self.sasl_port = _support.free_port(self.host)
        props_file = self.workdir / "server.properties"
        props_file.write_text("".join(f"{k}={v}\n" for k, v in self.server_properties().items()))
        log4j = self.workdir / "log4j2.properties"
        log4j.write_text(_LOG4J2_PROPERTIES)
        classpath = f"{libs}/*"
        jvm = [str(java), f"-Dlog4j2.configurationFile={log4j}", "-Djava.awt.headless=true"]

        fmt = subprocess.run(
            [*jvm, "-Xmx256m", "-cp", classpath, "kafka.tools.StorageTool", "format",
             "-t", _random_cluster_id(), "-c", str(props_file)],
            check=False, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=self.workdir,
        )
        if fmt.returncode != 0:
            output = fmt.stdout + fmt.stderr
            first = _support.first_error_line(output)
            raise ComponentUnavailable(
                "kafka", f"`kafka.tools.StorageTool format` failed (exit {fmt.returncode})"
                + (f": {first}" if first else ""),
                log_tail="\n".join(output.splitlines()[-40:]),
            )

        cmd = [
            *_support.pdeathsig_prefix("KILL"), *jvm,
            f"-Xmx{self.heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-cp", classpath, "kafka.Kafka", str(props_file),
        ]
        with open(self.workdir / self.log_name, "wb") as out:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.workdir, start_new_session=True,
            )
        self._record = _support.register_child("kafka", self._proc.pid, self.workdir)
        _support.track(self)
        self._bootstrap = f"{self.host}:{self.port}"
        started = time.monotonic()
        self.wait_ready(self.startup_timeout)
        log.info("kafka %s ready at %s in %.1fs (pid %s, %s)", self.version, self._bootstrap,
                 time.monotonic() - started, self._proc.pid, self.workdir)

    def _where(self) -> str:
        return f"Apache Kafka {self.version} broker at {self._bootstrap}"


def start_or_reuse(*, env: Mapping[str, str] | None = None, **broker_kwargs) -> KafkaEndpoint:
    """The broker for a test session: reuse ``$CONVEYOR_KAFKA_BOOTSTRAP`` if set (with
    ``$CONVEYOR_KAFKA_SASL_BOOTSTRAP`` as its SASL_PLAINTEXT/PLAIN listener, if set), else start one.

    Args:
        env: environment to read (default ``os.environ``).
        **broker_kwargs: passed to :class:`KafkaBroker` when one is started.

    Returns:
        A ready :class:`ExternalKafka` or a started :class:`KafkaBroker` (call ``stop()`` when
        done; it is a no-op for the external one).

    Raises:
        ComponentUnavailable: the reused broker does not answer within 30 s, or starting failed.
    """
    environ = os.environ if env is None else env
    return reuse_or_start(environ, ENV_BOOTSTRAP, lambda value: ExternalKafka(value, environ.get(ENV_SASL_BOOTSTRAP)),
                          lambda: KafkaBroker(**broker_kwargs).start())

