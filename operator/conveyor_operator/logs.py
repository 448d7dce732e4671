"""The operator's logging, with the driver's secret redaction (issue 28).

Every handler that writes the operator's records gets :class:`conveyor.api.redaction.RedactSecrets`
(a handler filter: a logger's own filters miss the records of its children):

* the root logger's stream handler, where the operator's loggers, kopf's (``kopf.*``) and
  kopf's per-object loggers (``kopf.objects``, an ``ObjectLogger`` per Connector) end up;
* kopf's ``K8sPoster`` on ``kopf.objects``, which posts per-object log lines as Kubernetes
  Events when ``settings.posting.loggers`` is on (off by default since kopf 1.38);
* any other handler a library installed (kopf's own ``kopf run`` setup replaces the root
  logger's handler: :func:`redact_handlers` runs again in the startup handler, after it).
"""

from __future__ import annotations

import logging

from conveyor.api.redaction import RedactSecrets

FORMAT = "%(asctime)s %(levelname)s [%(name)s] %(message)s"


def configure_logging(level: str) -> None:
    """Log at ``level`` (a :mod:`logging` level name, any case) to stderr, every handler redacting.

    Raises:
        ValueError: ``level`` is not a level name.
    """
    import kopf  # noqa: F401 - importing kopf installs its K8sPoster handler on kopf.objects

    logging.basicConfig(level=level.upper(), format=FORMAT)
    redact_handlers()


def redact_handlers() -> int:
    """Attach :class:`RedactSecrets` to every handler of every logger that has none yet;
    returns how many it attached (0 when called again with nothing new)."""
    known = list(logging.Logger.manager.loggerDict.values())  # a copy: other threads may add loggers
    loggers = [logging.getLogger(), *(logger for logger in known if isinstance(logger, logging.Logger))]
    attached = 0
    for logger in loggers:
        for handler in logger.handlers:
            if not any(isinstance(f, RedactSecrets) for f in handler.filters):
                handler.addFilter(RedactSecrets())
                attached += 1
    return attached
