"""Checks of a Connector the CRD schema cannot make: the images and ServiceAccounts the
operator's settings allow, the connector's own configuration validation, and the Secrets and
ConfigMaps it references."""

from __future__ import annotations

import logging
import re
from fnmatch import fnmatchcase

from kubernetes.client.rest import ApiException

from conveyor.api.redaction import redact_text
from conveyor.import_policy import ImportNotAllowed
from conveyor.manifest import ConnectorManifest
from conveyor.manifest.autoscaler import autoscaling
from conveyor.runtime.config.validation import PreflightError, config_field, connector_class, validate_config
from conveyor_operator.kube import Kube
from conveyor_operator.settings import OperatorSettings

log = logging.getLogger(__name__)

_REFERENCE = re.compile(
    r"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$")
"""An image reference (the OCI distribution reference grammar, simplified): matched before the
allow-list, so that a glob's ``*`` cannot stretch over something that is not a tag or digest."""


def not_permitted(manifest: ConnectorManifest, settings: OperatorSettings) -> str:
    """The fields naming an image or ServiceAccount the operator's settings do not allow
    (issue 13 item 4: ``connectors.allowedImages``, ``connectors.allowedServiceAccounts``;
    fnmatch patterns, case-sensitive). Unset fields are the operator's own choice and always
    allowed.

    Returns:
        One ``spec.spark.image: 'evil/image:1' is not allowed (connectors.allowedImages)`` line
        per field, or ``""``.
    """
    spark = manifest.spec.spark
    problems = []
    if spark.image is not None:
        if not _REFERENCE.match(spark.image):
            problems.append(f"spec.spark.image: {spark.image!r} is not an image reference")
        elif not any(fnmatchcase(spark.image, p) for p in settings.image_patterns()):
            problems.append(f"spec.spark.image: {spark.image!r} is not allowed (connectors.allowedImages)")
    account = spark.service_account
    if account is not None and not any(fnmatchcase(account, p) for p in settings.allowed_service_accounts):
        problems.append(f"spec.spark.serviceAccount: {account!r} is not allowed (connectors.allowedServiceAccounts)")
    return "\n".join(problems)


def connector_config_errors(manifest: ConnectorManifest) -> str:
    """The connector's own validation (and the runtime's keys) run in the operator, so a
    bad config is reported on the Connector instead of crash-looping a driver.

    Keys whose value is only known in the pods (``${...}`` references, or anything when
    ``configFrom`` supplies keys) are not judged here; the driver checks them.

    Returns:
        One ``spec.config.<key>: <message>`` line per invalid key, or ``""``.

    Raises:
        conveyor.import_policy.ImportNotAllowed: under :func:`conveyor.import_policy.restricted`,
            the spec names a class in a module it refuses (see
            :func:`conveyor_operator.validate.connector_classes.config_errors`, which the operator calls).
    """

    try:
        cls, connector_type = connector_class(manifest.spec.connector_class)
    except (PreflightError, ImportError) as exc:
        # Custom connectors live in the runtime image, not necessarily in the operator's:
        # the driver judges them (and reports a FAILED connector without crash-looping).
        # The built-in ones are all in the operator's image (see the Dockerfile).
        log.warning("connector %s (%s) not checked in the operator, the driver will: %s", manifest.name,
                    manifest.spec.connector_class, exc)
        return ""
    if connector_type == "source" and autoscaling(manifest.spec.autoscaler):
        return ("spec.autoscaler: only sink connectors are autoscaled (it scales by their consumer group's lag; "
                "a source connector has none)")
    config = dict(manifest.spec.config)
    deferred = {k for k, v in config.items() if isinstance(v, str) and "${" in v}
    try:
        connector = cls()
        validate_config(connector, connector_type, config, manifest.name)
    except PreflightError as exc:
        return "\n".join(f"{config_field(key)}: {message}" for key, message in exc.errors.items()
                         if key not in deferred and not (manifest.spec.config_from and key not in config))
    except ImportNotAllowed:
        raise  # a class the config names is for the driver to import (conveyor_operator.validate.connector_classes)
    except Exception as exc:  # noqa: BLE001 - a connector's validate() may raise anything
        return f"spec.config: the connector's validation failed: {type(exc).__name__}: {redact_text(str(exc))}"
    return ""


def check_references(kube: Kube, manifest: ConnectorManifest) -> str:
    """Names every Secret and ConfigMap the spec references that does not exist, with
    the field that references it; ``""`` when all exist. ConfigMaps are read; Secrets are
    not (the operator may not ``get`` them): a dry-run create tells whether one exists
    (:meth:`Kube.exists_by_dry_run`)."""
    ns = manifest.metadata.namespace
    wanted: list[tuple[str, str, str]] = []
    for i, source in enumerate(manifest.spec.config_from):
        field = "secretRef" if source.secret_ref is not None else "configMapRef"
        wanted.append((source.kind, source.name, f"spec.configFrom[{i}].{field}"))
    tls, sasl = manifest.spec.kafka.tls, manifest.spec.kafka.authentication
    if tls is not None:
        for field in ("trusted_certificate", "certificate", "key"):
            ref = getattr(tls, field)
            if ref is not None:
                alias = {"trusted_certificate": "trustedCertificate"}.get(field, field)
                wanted.append(("Secret", ref.name, f"spec.kafka.tls.{alias}"))
    if sasl is not None:
        wanted.append(("Secret", sasl.password_secret.name, "spec.kafka.authentication.passwordSecret"))
    missing = []
    for kind, name, field in wanted:
        try:
            found = (kube.exists_by_dry_run("v1", kind, ns, name) if kind == "Secret"
                     else kube.get("v1", kind, ns, name) is not None)
        except ApiException as exc:
            if exc.status == 403:
                missing.append(f"{field}: {kind} {name!r} cannot be checked by the operator (forbidden)")
                continue
            raise
        if not found:
            missing.append(f"{field}: {kind} {name!r} not found in namespace {ns}")
    return "\n".join(missing)
