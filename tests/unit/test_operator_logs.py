"""The operator's logs, and the Events kopf posts from them, go through the driver's secret
redaction (issue 28): real kopf loggers and kopf's own K8sPoster, the operator's logging setup."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

import kopf
from conveyor_operator.logs import configure_logging, redact_handlers
from kopf._core.engines import posting

from conveyor.api.redaction import HIDDEN, RedactSecrets, remember_resolved

RESOLVED = "operator-log-canary-3e1f9"
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7operatorcanary"
PEM = f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY-----\n"
CONNECTOR = kopf.Body({"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
                       "metadata": {"name": "orders", "namespace": "data", "uid": "u-1"}})


@contextlib.contextmanager
def bare_root_logger() -> Iterator[None]:
    """The root logger without handlers (pytest's are put back afterwards), and kopf's
    handlers without the filters added meanwhile."""
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    kopf_filters = {h: h.filters[:] for h in logging.getLogger("kopf.objects").handlers}
    asyncio_logger = logging.getLogger("asyncio")  # kopf.configure() mutes it
    saved_asyncio = asyncio_logger.handlers[:], asyncio_logger.propagate
    root.handlers = []
    try:
        yield
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers, root.level = saved_handlers, saved_level
        for handler, filters in kopf_filters.items():
            handler.filters = filters
        asyncio_logger.handlers, asyncio_logger.propagate = saved_asyncio


def _log_through_kopf(settings: kopf.OperatorSettings) -> list[posting.K8sEvent]:
    """Log through a real per-object logger (as in a handler of the Connector) and return the
    Events kopf's K8sPoster queued from it."""

    async def run() -> list[posting.K8sEvent]:
        queue: asyncio.Queue[posting.K8sEvent] = asyncio.Queue()
        posting.event_queue_var.set(queue)
        posting.event_queue_loop_var.set(asyncio.get_running_loop())
        logger = kopf.ObjectLogger(body=CONNECTOR, settings=settings)
        logger.warning("driver refused: password authentication failed for %s", RESOLVED)
        logger.warning("config %s", {"topics": "orders", "ssl.keystore.key": PEM, "azure.account.key": "acct-canary"})
        return [queue.get_nowait() for _ in range(queue.qsize())]

    return asyncio.run(run())


def _assert_redacted(text: str) -> None:
    assert RESOLVED not in text and PEM_BODY not in text and "acct-canary" not in text, text
    assert "${secret:pg:password}" in text and f"'ssl.keystore.key': '{HIDDEN}'" in text, text


def test_operator_logs_and_the_events_kopf_posts_from_them_are_redacted(capsys):
    remember_resolved(RESOLVED, "${secret:pg:password}")
    settings = kopf.OperatorSettings()
    settings.posting.level = logging.WARNING  # as conveyor_operator.handlers.activities.startup sets it
    settings.posting.loggers = True  # kopf 1.45 posts log lines as Events only when asked
    with bare_root_logger():
        configure_logging("info")
        events = _log_through_kopf(settings)
        logging.getLogger("conveyor_operator").info("pushing config %s", {"connection.password": RESOLVED,
                                                                          "ssl.keystore.key": PEM})
        try:
            raise RuntimeError(f"login as {RESOLVED} refused")
        except RuntimeError:
            logging.getLogger("kopf.objects").exception("Handler 'reconcile' failed")

    assert [e.reason for e in events] == ["Logging", "Logging"]
    _assert_redacted("\n".join(e.message for e in events))
    err = capsys.readouterr().err
    assert "pushing config" in err and "connection.password': '[hidden]'" in err
    assert "Handler 'reconcile' failed" in err and "RuntimeError: login as ${secret:pg:password}" in err
    _assert_redacted(err)


def test_kopfs_own_logging_setup_is_redacted_once_the_startup_handler_ran(capsys):
    """``kopf run`` replaces the root logger's handler; the startup handler attaches the filter again."""
    remember_resolved(RESOLVED, "${secret:pg:password}")
    with bare_root_logger():
        configure_logging("INFO")
        kopf.configure(verbose=True)  # what `kopf run --verbose` does before the operator starts
        assert redact_handlers() > 0  # kopf's new stream handler (and asyncio's NullHandler)
        assert redact_handlers() == 0
        assert all(any(isinstance(f, RedactSecrets) for f in h.filters) for h in logging.getLogger().handlers)
        _log_through_kopf(kopf.OperatorSettings())
    _assert_redacted(capsys.readouterr().err)
