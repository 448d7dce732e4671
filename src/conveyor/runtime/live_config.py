"""What ``PUT /config`` may change on a running driver, and what only a new driver may.

A running driver takes ``spec.config``, ``tasksMax`` and ``state`` live. It refuses, with 409,
a change that would move credentials (issue 13, "PUT /config cannot move credentials"):

* ``spec.kafka`` (bootstrap servers, TLS, SASL: the Kafka password goes where these say),
  ``spec.configFrom`` (which Secrets are merged into the config), ``spec.spark`` and
  ``spec.shutdown`` (not live either): only a driver started from the manifest takes them;
* any ``spec.config`` change of a connector whose config resolves credentials
  (``configFrom``, ``${secret:...}``, ``${configmap:...}``, ``${env:...}``): a new
  ``connection.url`` must never receive the password another key resolves.

On Kubernetes the operator then rolls the driver (its Deployment's template changes), so the
new driver reads the new manifest with the Secrets mounted for it; only whoever may edit the
Connector can do that.
"""

from __future__ import annotations

import re
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from conveyor.manifest import ConnectorSpec, with_mounted_config
from conveyor.runtime.operation_error import OperationError

if TYPE_CHECKING:
    from conveyor.runtime.driver import Driver

_REFERENCE = re.compile(r"\$\{(secret|configmap|env):")
#: The spec fields only a new driver takes (the manifest's names).
_ROLLING_FIELDS = {"kafka": "spec.kafka", "config_from": "spec.configFrom", "spark": "spec.spark",
                   "shutdown": "spec.shutdown"}


def uses_credentials(spec: ConnectorSpec) -> bool:
    """Whether ``spec`` (as written, references unresolved) takes config values from Secrets,
    ConfigMaps or the environment."""
    return bool(spec.config_from) or any(isinstance(v, str) and _REFERENCE.search(v) for v in spec.config.values())


def live_change_refusal(running: ConnectorSpec, written: ConnectorSpec, resolved: ConnectorSpec) -> str | None:
    """Why the driver running ``running`` (resolved) must not take ``written`` live, or ``None``.
    ``configFrom`` cannot differ when the config is compared, so ``written`` alone says whether
    credentials are in play.

    Args:
        running: the driver's spec, references resolved.
        written: the new spec as sent (references unresolved).
        resolved: the same, references resolved.
    """
    for field, name in _ROLLING_FIELDS.items():
        if getattr(written, field) != getattr(running, field):
            return f"{name} cannot change on a running driver: a driver started with it takes it"
    if resolved.config != running.config and uses_credentials(written):
        return ("spec.config of a connector that resolves credentials (configFrom, ${secret:...}, ${env:...}) "
                "cannot change on a running driver: a driver started with it takes it")
    return None


def apply_written_spec(driver: Driver, written: ConnectorSpec, source: str = "PUT /config") -> dict[str, Any]:
    """Give the running ``driver`` the new ``written`` spec (``PUT /config``, Kafka Connect's
    ``PUT /connectors/<name>/config``): references resolved, then :meth:`Driver.reconfigure`.

    Raises:
        OperationError: 409 when :func:`live_change_refusal` refuses it.
        ManifestError: a reference names a source that is not mounted.
    """
    spec = with_mounted_config(written, source=source)
    if refusal := live_change_refusal(driver.manifest.spec, written, spec):
        raise OperationError(HTTPStatus.CONFLICT, refusal)
    return driver.reconfigure(spec)
