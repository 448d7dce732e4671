"""The operator's rule for a request the API server throttles (429 Too Many Requests, as its
priority and fairness answers under load): sent again after the Retry-After it asks for; any
other error answer is raised at once."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from conveyor_operator import kube as kube_module
from conveyor_operator.kube import Kube


class _Response:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def release_conn(self) -> None:
        pass


class _Answers:
    """What the ApiClient's ``call_api`` answers, one after another."""

    def __init__(self, *answers) -> None:
        self.answers = list(answers)
        self.calls = 0

    def call_api(self, *_args, **_kwargs):
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return _Response(json.dumps(answer).encode())


def _error(status: int, retry_after: str | None = None) -> ApiException:
    exc = ApiException(status=status, reason="Too Many Requests" if status == 429 else "Forbidden")
    exc.headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return exc


def _kube(answers: _Answers) -> Kube:
    return Kube(api_client=answers, field_manager="test")  # type: ignore[arg-type]


def test_a_throttled_request_is_sent_again_until_it_is_answered():
    answers = _Answers(_error(429, "0"), _error(429, "0"), {"kind": "Status", "status": "Success"})
    assert _kube(answers)._call("/api/v1/namespaces/ns/secrets", "POST", {}) == {"kind": "Status", "status": "Success"}
    assert answers.calls == 3


def test_any_other_error_answer_is_raised_at_once():
    answers = _Answers(_error(403), {"never": "reached"})
    with pytest.raises(ApiException) as raised:
        _kube(answers)._call("/api/v1/namespaces/ns/secrets", "POST", {})
    assert raised.value.status == 403 and answers.calls == 1


def test_the_wait_is_what_retry_after_asks_with_some_jitter_and_never_more_than_ten_seconds():
    class State:
        attempt_number = 1

        def __init__(self, exc):
            self.outcome = type("Outcome", (), {"exception": lambda _self: exc})()

    waits = [kube_module._retry_after(State(_error(429, "1"))) for _ in range(50)]
    assert all(1.0 <= w <= 1.2 for w in waits) and len(set(waits)) > 1, waits
    assert 10.0 <= kube_module._retry_after(State(_error(429, "3600"))) <= 12.0
    assert 0.0 <= kube_module._retry_after(State(_error(429))) <= 5.0, "no Retry-After: jittered back-off"
