"""pytest fixtures giving tests a real S3 server (S3Proxy, a separate JVM on 127.0.0.1).

Enable in a ``conftest.py``::

    pytest_plugins = ["conveyor.testing.pytest_s3"]

* ``s3_server`` (session) -> :class:`~conveyor.testing.s3.S3Server`: S3Proxy started on a free
  ``127.0.0.1`` port for the session (about 2-3 s; jar resolved into the harness cache on first
  use), with a filesystem blob store in a temp dir removed at the end. It checks request
  signatures against one identity; while it runs, the environment holds it
  (:func:`~conveyor.testing.s3.credentials_env`: ``AWS_ACCESS_KEY_ID=conveyor``,
  ``AWS_SECRET_ACCESS_KEY=conveyor-secret``, ``AWS_DEFAULT_REGION`` / ``AWS_REGION=us-east-1``)
  so that s3fs and botocore clients created by the code under test sign their requests with
  it, and ``AWS_PROFILE`` / ``AWS_ENDPOINT_URL*`` / ``AWS_SESSION_TOKEN`` are removed so that
  nothing reaches real AWS, or signs with another identity, by accident. The previous
  environment is restored at the end of the session.
* ``s3_bucket`` (function) -> ``str``: the name of a new, empty bucket for this test
  (``t-<test name>-<random>``), deleted with its objects afterwards.

Point a connector at them with the endpoint URL, e.g. the archive sink::

    config = {"archive.url": f"s3://{s3_bucket}/archive",
              "archive.s3.endpoint.url": s3_server.endpoint_url}

When S3Proxy cannot be resolved or started (no Java 17+, no Maven, the JVM exits...), the
fixtures *fail* with the :class:`~conveyor.testing.errors.ComponentUnavailable` message and the
server log's last lines; nothing is skipped.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import TypeVar

import pytest

from conveyor.testing.fixtures import running, start_or_fail

T = TypeVar("T")

_AWS_VARS_TO_CLEAR = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
                      "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")



@pytest.fixture(scope="session")
def s3_server() -> Iterator[object]:
    """The session's S3 server (:class:`~conveyor.testing.s3.S3Server`, S3Proxy)."""
    from conveyor.testing.s3 import S3Server, credentials_env

    with pytest.MonkeyPatch.context() as env:
        for name, value in credentials_env().items():
            env.setenv(name, value)
        for name in _AWS_VARS_TO_CLEAR:
            env.delenv(name, raising=False)
        with running(lambda: S3Server().start()) as server:
            yield server


@pytest.fixture
def s3_bucket(s3_server, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh bucket for this test; deleted (with its objects) afterwards."""
    slug = re.sub(r"[^a-z0-9]+", "-", re.sub(r"^test_?", "", request.node.name.lower())).strip("-")[:40] or "t"
    name = f"t-{slug}-{uuid.uuid4().hex[:10]}".replace("--", "-")
    start_or_fail(lambda: s3_server.create_bucket(name))
    try:
        yield name
    finally:
        s3_server.delete_bucket(name)
