"""An API server that stops answering fails the operator's call within its request timeout
(``kube_request_timeout_seconds``) instead of holding one of kopf's handler threads forever.
The server here is a listening socket that never answers: the point is the client's behaviour
when nothing comes back, which a real API server does not do on demand."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import urllib3
from conveyor_operator.kube import Kube
from conveyor_operator.settings import OperatorSettings
from kubernetes import client

from conveyor.testing.ports import silent_server


@pytest.fixture
def silent_api_server() -> Iterator[str]:
    with silent_server() as url:
        yield url


def test_a_call_to_an_api_server_that_never_answers_fails_within_the_read_timeout(silent_api_server):
    configuration = client.Configuration(host=silent_api_server)
    configuration.retries = False
    kube = Kube(client.ApiClient(configuration), "conveyor-test", request_timeout_s=(1.0, 0.5))
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.HTTPError) as failed:
        kube.get("v1", "ConfigMap", "default", "anything")
    elapsed = time.monotonic() - started
    assert elapsed < 10, f"took {elapsed:.1f}s"
    assert "timed out" in str(failed.value).lower(), failed.value


def test_the_read_timeout_is_a_setting_with_a_bounded_default():
    assert OperatorSettings().kube_request_timeout_seconds == 30.0
    settings = OperatorSettings.from_env({"CONVEYOR_OPERATOR_KUBE_REQUEST_TIMEOUT_SECONDS": "12.5"})
    assert settings.kube_request_timeout_seconds == 12.5
