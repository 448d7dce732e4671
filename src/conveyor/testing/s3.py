"""A real S3 server for tests: S3Proxy (``org.gaul:s3proxy``), a separate JVM on ``127.0.0.1``.

Why a real server: tests of S3 behaviour must talk to a server that parses and answers the S3
HTTP API itself and verifies request signatures, not to an in-process imitation. S3Proxy
(Apache-2.0, https://github.com/gaul/s3proxy) implements the S3 API over Apache jclouds; here
it uses jclouds' ``filesystem`` blob store, so buckets are directories and objects are files in
a temp dir the server owns.

The self-contained jar (``s3proxy-<version>-jar-with-dependencies.jar``, about 55 MB) is
resolved once from Maven Central with ``mvn dependency:copy`` into
``<cache>/s3proxy-<version>/libs`` (``<cache>`` is ``$CONVEYOR_CACHE_DIR`` or
``~/.cache/conveyor``; ``python -m conveyor.testing resolve --s3`` does it up front) and run with
Java 17+ (``-Xmx256m``; about 2-3 s to answer, 100-200 MB resident)::

    with S3Server() as s3:                                 # a free 127.0.0.1 port
        s3.create_bucket("archive")
        config = {
            "archive.url": "s3://archive/prefix",
            "archive.s3.endpoint.url": s3.endpoint_url,    # http://127.0.0.1:<port>
            "archive.s3.key": S3Server.ACCESS_KEY,         # or the AWS_* variables of credentials_env()
            "archive.s3.secret": S3Server.SECRET_KEY,
        }

The server accepts exactly one identity, :attr:`S3Server.ACCESS_KEY` / :attr:`S3Server.SECRET_KEY`,
with AWS signature V2 or V4; any other key or secret gets ``403 InvalidAccessKeyId`` /
``SignatureDoesNotMatch``. :func:`credentials_env` gives them as the ``AWS_*`` variables the
pytest fixture sets (``conveyor.testing.pytest_s3``).

An outage is simulated with ``stop(keep_data=True)`` then :meth:`S3Server.restart`: the JVM
goes away, and a new one serves the same buckets and objects on the same port. A plain
:meth:`S3Server.stop` (also run at interpreter exit) kills the JVM and removes the temp dir.

Every failure to resolve the jar, start the JVM or get an answer raises
:class:`~conveyor.testing.errors.ComponentUnavailable` (component ``"s3"``) with the reason and
the last lines of the server log; the fixtures turn it into a failure, never a skip.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from conveyor.testing import _support
from conveyor.testing.managed_server import ManagedServer
from conveyor.testing.maven import COPY_ARTIFACT, artifact_pom, resolve_libs

__all__ = ["S3PROXY_VERSION", "S3Server", "credentials_env", "s3proxy_jar"]

log = logging.getLogger("conveyor.testing.s3")

COMPONENT = "s3"
#: S3Proxy release the harness runs (Maven Central ``org.gaul:s3proxy``).
S3PROXY_VERSION = "4.1.0"
_CLASSIFIER = "jar-with-dependencies"
#: What S3Proxy logs (at ERROR, then exits 1) when its port is taken.
_PORT_CLASH = "Failed to bind to"


def credentials_env(region: str = "us-east-1") -> dict[str, str]:
    """``AWS_*`` environment variables holding the harness server's credentials and ``region``
    (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION``, ``AWS_REGION``)."""
    return {
        "AWS_ACCESS_KEY_ID": S3Server.ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": S3Server.SECRET_KEY,
        "AWS_DEFAULT_REGION": region,
        "AWS_REGION": region,
    }


# --------------------------------------------------------------------------------------------
# the jar


def render_pom(version: str = S3PROXY_VERSION) -> str:
    """The Maven POM naming S3Proxy's self-contained jar (for ``mvn dependency:copy``)."""
    return artifact_pom("s3proxy-jar", version, ("org.gaul", "s3proxy", version), _CLASSIFIER,
                        "the self-contained S3Proxy jar the test harness runs as its S3 server.")


def s3proxy_jar(version: str = S3PROXY_VERSION, *, timeout: float = 1800.0) -> Path:
    """Path of ``s3proxy-<version>-jar-with-dependencies.jar``; resolved on first use.

    The first call runs ``mvn -q -B dependency:copy`` (needs ``mvn``, Java and Maven Central, or
    a populated ``~/.m2``); later calls return the cached file at once; safe against concurrent
    callers.

    Args:
        version: S3Proxy version.
        timeout: seconds allowed for Maven.

    Returns:
        ``<cache>/s3proxy-<version>/libs/s3proxy-<version>-jar-with-dependencies.jar``.

    Raises:
        ComponentUnavailable: mvn is missing or the resolution failed.
    """
    jar = f"s3proxy-{version}-{_CLASSIFIER}.jar"
    libs = resolve_libs(_support.cache_root() / f"s3proxy-{version}", render_pom(version), jar,
                        component=COMPONENT, what=f"S3Proxy {version}", timeout=timeout, goal=COPY_ARTIFACT)
    return libs / jar


# --------------------------------------------------------------------------------------------
# the server


class S3Server(ManagedServer):

    """S3Proxy on ``127.0.0.1`` with a filesystem blob store in a temp dir of its own.

    Args:
        port: TCP port; ``0`` (default) picks a free one (and retries with another if it is
            taken before the JVM binds it).
        region: the region clients should use (``us-east-1``: buckets need no location).
        version: S3Proxy version (jar from Maven Central, see :func:`s3proxy_jar`).
        heap: JVM heap (``-Xmx``).
        startup_timeout: seconds :meth:`start` waits for the first answer.

    Attributes:
        port: the port once started (kept after ``stop(keep_data=True)`` for :meth:`restart`).
        workdir: the temp dir (``s3proxy.properties``, ``s3proxy.log``, ``data/<bucket>/<key>``),
            or None before the first start and after a plain :meth:`stop`.
        ready_seconds: seconds from launching the JVM to its first signed answer (last start).

    Raises (from :meth:`start`):
        ComponentUnavailable: Java/Maven missing, jar resolution or startup failed.
    """

    component = COMPONENT
    log_name = "s3proxy.log"  # appended to across restarts
    server_name = "S3Proxy"
    #: The one identity the server accepts (signature V2 or V4 over these).
    ACCESS_KEY = "conveyor"
    SECRET_KEY = "conveyor-secret"

    def __init__(self, port: int = 0, region: str = "us-east-1", *, version: str = S3PROXY_VERSION,
                 heap: str = "256m", startup_timeout: float = 60.0) -> None:
        self._init_server(startup_timeout, port)
        self.region = region
        self.version = version
        self.heap = heap

    # -- public ------------------------------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:<port>``: s3fs / boto3's ``endpoint_url``, the archive
        connector's ``archive.s3.endpoint.url`` (kept while stopped for a :meth:`restart`)."""
        if not self.port:
            raise RuntimeError("S3Server not started")
        return f"http://{_support.LOOPBACK}:{self.port}"

    def start(self, timeout: float | None = None) -> S3Server:
        """Resolve the jar if needed, start the JVM, wait until it answers a signed request.

        With data kept by ``stop(keep_data=True)``, the server comes back on the same port with
        the same buckets and objects.

        Args:
            timeout: seconds to wait for the answer (default: ``startup_timeout``).

        Returns:
            self (at once if already running).

        Raises:
            ComponentUnavailable: see the class docstring; also a fixed port that is taken.
        """
        if self.is_running():
            return self
        _support.reap_stale()
        jar = s3proxy_jar(self.version)
        java = _support.find_java_home(17, component=COMPONENT) / "bin" / "java"
        wait = self.startup_timeout if timeout is None else timeout
        if self.workdir is not None or self._fixed_port:  # this very port: one attempt
            restarting = self.workdir is not None
            try:
                self._start_once(java, jar, wait)
            except BaseException:
                self.stop(keep_data=restarting)
                raise
        else:
            _support.start_with_port_retries(lambda: self._start_once(java, jar, wait), self.stop,
                                             _PORT_CLASH, COMPONENT)
        return self

    def stop(self, *, keep_data: bool = False) -> None:
        """Stop the JVM (SIGTERM, SIGKILL after 10 s). Idempotent.

        Args:
            keep_data: keep the temp dir (buckets, objects, log) and the port for
                :meth:`restart` (an outage); otherwise remove it. A kept dir is still removed
                at interpreter exit, and by a later run if this process is killed.
        """
        self._kill()
        if keep_data and self.workdir is not None:
            return  # still tracked: the atexit hook's stop() removes the dir
        self._discard()

    def restart(self, timeout: float | None = None) -> None:
        """Start again on the same port with the same buckets and objects; stops the running
        JVM first (keeping the data). Used to end a simulated outage.

        Raises:
            RuntimeError: there is nothing to restart (never started, or a plain :meth:`stop`
                removed the data).
            ComponentUnavailable: as :meth:`start` (e.g. the port was taken meanwhile).
        """
        if self.workdir is None:
            raise RuntimeError("S3Server.restart(): no data to restart with (start() it, or stop(keep_data=True))")
        self.stop(keep_data=True)
        self.start(timeout)

    def __enter__(self) -> S3Server:  # noqa: PYI034 - Python 3.10 has no typing.Self
        return self.start()

    def __repr__(self) -> str:
        return f"S3Server(version={self.version!r}, port={self.port}, pid={self.pid}, workdir={self.workdir})"

    # -- S3 helpers ----------------------------------------------------------------------------

    def client(self) -> Any:
        """A botocore S3 client for this server (its credentials, short timeouts; cached
        until :meth:`stop`)."""
        if self._client is None:
            import botocore.session
            from botocore.config import Config

            self._client = botocore.session.get_session().create_client(
                "s3",
                endpoint_url=self.endpoint_url,
                region_name=self.region,
                aws_access_key_id=self.ACCESS_KEY,
                aws_secret_access_key=self.SECRET_KEY,
                config=Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 2}),
            )
        return self._client

    def filesystem(self) -> Any:
        """A new (uncached) ``s3fs.S3FileSystem`` for this server: its credentials, the same
        short timeouts as :meth:`client`, one s3fs attempt."""
        import fsspec

        fs = fsspec.filesystem(
            "s3", endpoint_url=self.endpoint_url, key=self.ACCESS_KEY, secret=self.SECRET_KEY,
            client_kwargs={"region_name": self.region}, skip_instance_cache=True,
            config_kwargs={"connect_timeout": 5, "read_timeout": 30, "retries": {"max_attempts": 2}},
        )
        fs.retries = 1
        return fs

    def create_bucket(self, name: str) -> str:
        """Create bucket ``name`` (S3 rules: 3-63 characters, lowercase, digits, ``-``, ``.``).
        Returns ``name``.

        Raises:
            ComponentUnavailable: the server refused or did not answer.
        """
        try:
            self.client().create_bucket(Bucket=name)
        except Exception as exc:  # noqa: BLE001 - reported as the component's failure
            raise self._unavailable(f"cannot create bucket {name!r}: {exc}") from None
        return name

    def delete_bucket(self, name: str) -> None:
        """Delete bucket ``name`` and every object in it (no error when it is gone)."""
        client = self.client()
        with contextlib.suppress(Exception):
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
                keys = [{"Key": obj["Key"]} for obj in page.get("Contents", [])]
                if keys:
                    client.delete_objects(Bucket=name, Delete={"Objects": keys})
            client.delete_bucket(Bucket=name)

    def list_keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key in ``bucket`` under ``prefix``, sorted.

        Raises:
            botocore.exceptions.ClientError: e.g. ``NoSuchBucket``.
        """
        keys: list[str] = []
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.extend(obj["Key"] for obj in page.get("Contents", []))
        return sorted(keys)

    def get_bytes(self, bucket: str, key: str) -> bytes:
        """The content of object ``key``.

        Raises:
            botocore.exceptions.ClientError: e.g. ``NoSuchKey``.
        """
        return self.client().get_object(Bucket=bucket, Key=key)["Body"].read()

    # -- internals -----------------------------------------------------------------------------

    def server_properties(self) -> dict[str, str]:
        """S3Proxy's ``--properties`` file (needs the port and workdir assigned)."""
        assert self.workdir and self.port
        return {
            "s3proxy.endpoint": self.endpoint_url,
            "s3proxy.authorization": "aws-v2-or-v4",
            "s3proxy.identity": self.ACCESS_KEY,
            "s3proxy.credential": self.SECRET_KEY,
            "jclouds.provider": "filesystem",
            "jclouds.filesystem.basedir": str(self.workdir / "data"),
            "jclouds.identity": self.ACCESS_KEY,
            "jclouds.credential": self.SECRET_KEY,
        }

    def _start_once(self, java: Path, jar: Path, timeout: float) -> None:
        restarting = self.workdir is not None
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="conveyor-s3-"))
            (self.workdir / "data").mkdir()
            if not self._fixed_port:
                self.port = _support.free_port(_support.LOOPBACK)
        if (restarting or self._fixed_port) and not _port_free(self.port):  # say so plainly
            raise self._unavailable(f"port {_support.LOOPBACK}:{self.port} is not free",
                                    hint="use port=0 for a free port" if self._fixed_port else "")
        props = self.workdir / "s3proxy.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self.server_properties().items()))
        cmd = [
            *_support.pdeathsig_prefix("KILL"), str(java),
            f"-Xmx{self.heap}", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
            "-Dlogback.statusListenerClass=ch.qos.logback.core.status.NopStatusListener",  # no config chatter
            "-jar", str(jar), "--properties", str(props),
        ]
        started = time.monotonic()
        with open(self.workdir / "s3proxy.log", "ab") as out:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.workdir, start_new_session=True,
            )
        _support.unregister_child(self._record)  # the record of the JVM before a restart
        self._record = _support.register_child("s3", self._proc.pid, self.workdir)
        _support.track(self)
        self._wait_ready(started, timeout)
        self.ready_seconds = time.monotonic() - started
        log.info("S3Proxy %s ready at %s in %.1fs (pid %s, %s)", self.version, self.endpoint_url,
                 self.ready_seconds, self._proc.pid, self.workdir)

    def _wait_ready(self, started: float, timeout: float) -> None:
        """Wait until ``GET /`` gets an HTTP answer (403 unsigned), then list the buckets signed."""
        deadline = started + timeout
        last_error = "no answer"
        while True:
            self._check_alive()
            if time.monotonic() >= deadline:
                raise self._unavailable(f"no answer on {self.endpoint_url} within {timeout:.0f}s (last: {last_error})")
            try:
                conn = http.client.HTTPConnection(_support.LOOPBACK, self.port, timeout=2.0)
                try:
                    conn.request("GET", "/")
                    conn.getresponse().read()
                finally:
                    conn.close()
                break
            except (OSError, http.client.HTTPException) as exc:
                last_error = str(exc) or type(exc).__name__
                time.sleep(0.1)
        try:
            self.client().list_buckets()
        except Exception as exc:  # noqa: BLE001 - a signed request must succeed
            raise self._unavailable(f"a signed ListBuckets failed: {exc}") from None

    def _check_alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            clash = _PORT_CLASH in _support.tail(self.log_path, 40) if self.log_path else False
            raise self._unavailable(
                f"the S3Proxy process exited with code {self._proc.returncode} during startup",
                hint="another process took the port" if clash else
                f"a damaged jar is fetched again once {s3proxy_jar(self.version).parent.parent} is removed",
            )

    def _first_error(self, log_text: str) -> str:
        return _first_error_line(log_text)


def _first_error_line(log_text: str) -> str:
    """The first ERROR line of S3Proxy's log (``[s3proxy] E <time> <thread> <logger> |...] message``,
    returned from the logger on), else the first line that looks like a JVM error, else ""."""
    for line in log_text.splitlines():
        if line.startswith("[s3proxy] E "):
            return line.split(" ", 5)[-1].strip()
    return _support.first_error_line(log_text)


def _port_free(port: int) -> bool:
    """True if ``127.0.0.1:port`` can be bound right now (SO_REUSEADDR, as the JVM binds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((_support.LOOPBACK, port))
        except OSError:
            return False
    return True
