"""A local S3 API for tests: moto's server (``moto[server]``), in this process.

:class:`S3Server` runs ``moto.server.ThreadedMotoServer`` on a free ``127.0.0.1`` port (a
daemon thread of the test process; nothing to install beyond the Python package, nothing
left behind: the data lives in memory and goes with the process). It speaks the real S3
HTTP API, so s3fs / boto3 clients talk to it exactly as to AWS, only at
:attr:`S3Server.endpoint_url`::

    with S3Server() as s3:
        s3.create_bucket("archive")
        config = {
            "archive.url": "s3://archive/prefix",
            "archive.s3.endpoint.url": s3.endpoint_url,   # the connector's endpoint key
            # credentials: any will do; either these keys or AWS_ACCESS_KEY_ID/..._SECRET_...
            "archive.s3.key": S3Server.ACCESS_KEY,
            "archive.s3.secret": S3Server.SECRET_KEY,
        }

moto accepts any credentials but botocore insists on having some: :func:`fake_credentials_env`
gives the ``AWS_*`` variables the pytest fixture sets (``conveyor.testing.pytest_s3``).

Buckets and objects of all moto servers of one process live in one in-memory backend, so
a server stopped and started again on the same port (:meth:`S3Server.restart`) still has
them: that is how tests simulate an S3 outage.

When moto is missing or the server does not answer, :class:`ComponentUnavailable`
(component ``"s3"``) is raised; the fixtures turn it into a failure, never a skip.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from typing import Any

from conveyor.testing._support import LOOPBACK
from conveyor.testing.errors import ComponentUnavailable

__all__ = ["S3Server", "fake_credentials_env"]

log = logging.getLogger("conveyor.testing")

_HINT = "pip install 'moto[server]' (it is in conveyor's [dev] extra)"


def fake_credentials_env(region: str = "us-east-1") -> dict[str, str]:
    """``AWS_*`` environment variables with fake credentials for the local server."""
    return {
        "AWS_ACCESS_KEY_ID": S3Server.ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": S3Server.SECRET_KEY,
        "AWS_SESSION_TOKEN": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_DEFAULT_REGION": region,
        "AWS_REGION": region,
    }


class S3Server:
    """moto's S3-compatible server on ``127.0.0.1``.

    Args:
        port: TCP port; ``0`` (default) lets the OS choose a free one.
        region: the region clients should use (``us-east-1``: buckets need no location).

    Attributes:
        endpoint_url: ``http://127.0.0.1:<port>`` once started: what s3fs / boto3 take as
            ``endpoint_url`` and the archive connector as ``archive.s3.endpoint.url``.
        port: the port once started.
    """

    ACCESS_KEY = "testing"
    SECRET_KEY = "testing"

    def __init__(self, port: int = 0, region: str = "us-east-1") -> None:
        self.port = port
        self.region = region
        self._server: Any = None
        self._client: Any = None

    @property
    def endpoint_url(self) -> str:
        if not self.port:
            raise RuntimeError("S3Server not started")
        return f"http://{LOOPBACK}:{self.port}"  # kept while stopped for a restart()

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> S3Server:
        """Start the server and wait until it answers S3 requests. Returns ``self``.

        Raises:
            ComponentUnavailable: moto is not installed, the port cannot be bound, or the
                server does not answer within ``timeout`` seconds.
        """
        try:
            from moto.server import ThreadedMotoServer
        except ImportError as exc:
            raise ComponentUnavailable("s3", f"moto's server is not importable ({exc})", hint=_HINT) from None
        # werkzeug logs every request at INFO on its own handler; keep test output quiet.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        server = ThreadedMotoServer(ip_address=LOOPBACK, port=self.port, verbose=False)
        failure: list[BaseException] = []

        def run() -> None:
            try:
                server.start()
            except BaseException as exc:  # noqa: BLE001 - reported below
                failure.append(exc)

        if self.port:
            self._check_port_free()
        starter = threading.Thread(target=run, name="s3-server-start", daemon=True)
        starter.start()
        deadline = time.monotonic() + timeout
        while starter.is_alive() and time.monotonic() < deadline:
            starter.join(0.05)
            serving = getattr(server, "_thread", None)  # moto's own server thread
            if serving is not None and not serving.is_alive() and starter.is_alive():
                failure.append(RuntimeError("the server thread died while starting (see stderr)"))
                break
        if failure or starter.is_alive():
            reason = f"{type(failure[0]).__name__}: {failure[0]}" if failure else f"not started after {timeout:.0f}s"
            raise ComponentUnavailable("s3", f"moto server on {LOOPBACK}:{self.port or '<free port>'} failed: {reason}")
        try:
            _host, port = server.get_host_and_port()
        except Exception as exc:  # noqa: BLE001 - the thread died while binding
            raise ComponentUnavailable("s3", f"moto server did not bind {LOOPBACK}:{self.port}: {exc}") from None
        self._server, self.port = server, int(port)
        self._client = None
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            try:
                self.client().list_buckets()
                log.info("S3 (moto) listening on %s", self.endpoint_url)
                return self
            except Exception as exc:  # noqa: BLE001 - retried until the deadline
                last = exc
                time.sleep(0.1)
        self.stop()
        raise ComponentUnavailable("s3", f"moto server at {LOOPBACK}:{port} does not answer: {last}")

    def _check_port_free(self) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((LOOPBACK, self.port))
            except OSError as exc:
                raise ComponentUnavailable(
                    "s3", f"port {LOOPBACK}:{self.port} is not free ({exc})", hint="use port=0 for a free port"
                ) from None

    def stop(self) -> None:
        """Stop the server (idempotent). Buckets stay in the process's moto backend."""
        server, self._server = self._server, None
        self._client = None
        if server is not None:
            with contextlib.suppress(Exception):
                server.stop()

    def restart(self) -> None:
        """Start again on the same port after :meth:`stop` (buckets and objects kept).

        Raises:
            ComponentUnavailable: as :meth:`start`.
        """
        self.stop()
        self.start()

    def __enter__(self) -> S3Server:  # noqa: PYI034 - Python 3.10 has no typing.Self
        return self if self._server is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- helpers --------------------------------------------------------------------------

    def client(self) -> Any:
        """A boto3 S3 client for this server (fake credentials, short timeouts)."""
        if self._client is None:
            import boto3
            from botocore.config import Config

            self._client = boto3.client(
                "s3",
                endpoint_url=self.endpoint_url,
                region_name=self.region,
                aws_access_key_id=self.ACCESS_KEY,
                aws_secret_access_key=self.SECRET_KEY,
                config=Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 2}),
            )
        return self._client

    def create_bucket(self, name: str) -> str:
        """Create bucket ``name`` (S3 rules: 3-63 characters, lowercase, digits, ``-``, ``.``).
        Returns ``name``.

        Raises:
            ComponentUnavailable: the server refused or did not answer.
        """
        try:
            self.client().create_bucket(Bucket=name)
        except Exception as exc:  # noqa: BLE001 - reported as the component's failure
            raise ComponentUnavailable("s3", f"cannot create bucket {name!r}: {exc}") from None
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
        """Every object key in ``bucket`` under ``prefix``, sorted."""
        keys: list[str] = []
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.extend(obj["Key"] for obj in page.get("Contents", []))
        return sorted(keys)

    def get_bytes(self, bucket: str, key: str) -> bytes:
        """The content of object ``key``."""
        return self.client().get_object(Bucket=bucket, Key=key)["Body"].read()
