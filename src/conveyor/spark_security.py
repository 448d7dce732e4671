"""Spark's RPC security for a connector's driver and executors, and the ``sparkConf`` keys a
user may set (issue 13, item 3; issue 28, item 2). Pure: no Spark, Kafka or Kubernetes import,
so that the manifest, the driver and the operator share one list.

``spec.spark.sparkConf`` is an allow-list (:data:`ALLOWED`): what a connector's author tunes
(memory, cores and overheads, timeouts and retries, locality, node selectors, Spark's volume
keys checked by :mod:`conveyor.spark_volumes`). Everything else is refused naming the key:
among others every property that loads code into the driver or the executors
(``spark.jars*``, ``spark.plugins``, ``spark.extraListeners``, ``spark.submit.pyFiles``,
``spark.python.worker.module``, ``spark.executorEnv.LD_PRELOAD``, ``*.extraClassPath``,
``*.extraJavaOptions`` with ``-javaagent:``, ``spark.sql.extensions``, class-name properties
such as ``spark.serializer``), the pods' labels and annotations (NetworkPolicies and the
operator trust ``conveyor.dev/*`` labels), Secrets mounted into executors, and the web UI. A
platform widens the list with globs (:func:`allowed_patterns`: the Helm value
``connectors.allowedSparkConf``, which the operator passes to every driver as
:data:`ALLOWED_ENV`); the operator's own properties and Spark's RPC security stay refused
whatever the setting.

Driver and executors authenticate each other with a shared secret and encrypt their RPC with
AES-GCM (Spark's "Security" page, §Spark RPC: ``spark.authenticate``, §AES-based encryption:
``spark.network.crypto.*``). Names, values and defaults were checked against Spark 4.3.0's
``TransportConf``, ``AuthEngine`` and ``SecurityManager``:

* ``spark.network.crypto.cipher`` defaults to ``AES/CTR/NoPadding``; ``AES/GCM/NoPadding`` is
  the other mode ``AuthEngine`` accepts (authenticated encryption).
* ``spark.network.crypto.authEngineVersion`` defaults to 1, which skips the final HKDF of the
  session key; 2 does not.
* ``spark.network.crypto.saslFallback`` defaults to true (a peer may fall back to the older
  DIGEST-MD5 SASL handshake); false refuses it.
* On a local master ``spark.authenticate=true`` makes Spark generate its own secret; the
  secret-file keys (:func:`secret_file_properties`) are refused there ("Secret keys provided
  via files is only allowed in Kubernetes mode") and must come as a pair ("Secret files must
  be specified for both the driver and the executors").
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

ENFORCED: dict[str, str] = {
    "spark.authenticate": "true",
    "spark.network.crypto.enabled": "true",
    "spark.network.crypto.authEngineVersion": "2",
    "spark.network.crypto.cipher": "AES/GCM/NoPadding",
    "spark.network.crypto.saslFallback": "false",
}
"""Spark properties every driver runs with, on every master; applied last (see
:func:`conveyor.runtime.driver.spark_session.spark_properties`)."""

SECRET_FILE = "/etc/conveyor/control/spark-auth-secret"
"""Where driver and executor pods see the connector's Spark secret (key ``spark-auth-secret``
of the Secret ``<name>-control``), the same path in both."""

OPERATOR_KEYS: dict[str, str] = {
    # property -> where its value comes from; everything render.spark_conf sets
    "spark.master": "the operator (executor pods) or the driver (local)",
    "spark.submit.deployMode": "the operator",
    "spark.app.name": "metadata.name",
    "spark.driver.host": "the operator",
    "spark.driver.bindAddress": "the operator",
    "spark.driver.port": "the operator",
    "spark.driver.blockManager.port": "the operator",
    "spark.driver.cores": "spec.spark.driver.cores",
    "spark.driver.memory": "spec.spark.driver.memory",
    "spark.executor.instances": "spec.spark.executor.instances",
    "spark.executor.cores": "spec.spark.executor.cores",
    "spark.executor.memory": "spec.spark.executor.memory",
    "spark.kubernetes.namespace": "metadata.namespace",
    "spark.kubernetes.container.image": "spec.spark.image",
    "spark.kubernetes.container.image.pullPolicy": "spec.spark.imagePullPolicy",
    "spark.kubernetes.driver.pod.name": "the operator",
    "spark.kubernetes.authenticate.driver.serviceAccountName": "spec.spark.serviceAccount",
    "spark.kubernetes.executor.podNamePrefix": "the operator",
    "spark.kubernetes.executor.podTemplateFile": "the operator",
    "spark.kubernetes.executor.podTemplateContainerName": "the operator",
    "spark.kubernetes.executor.deleteOnTermination": "the operator",
    "spark.kubernetes.authenticate.executor.serviceAccountName": "the operator (conveyor-executor)",
    "spark.kubernetes.executor.disableConfigMap": "the operator",
    "spark.kubernetes.driver.service.deleteOnTermination": "the operator",
}
"""The properties the operator renders, with the field (or party) that sets each."""

_RPC = "set by the operator: Spark RPC is always authenticated and encrypted"
FORBIDDEN_PREFIXES: dict[str, str] = {
    # prefix -> the reason given; properties that decide Spark's RPC security or the pods' identity
    "spark.authenticate": _RPC,  # the switch, the secret, its files, SASL encryption
    "spark.network.crypto.": _RPC,
    "spark.network.sasl.": _RPC,
    "spark.ssl.": _RPC,  # TLS RPC (spark.ssl.rpc.enabled) turns AES encryption off
    "spark.executorEnv._SPARK_AUTH_SECRET": _RPC,  # the executors' secret, as Spark passes it
    "spark.kubernetes.executor.secretKeyRef._SPARK_AUTH_SECRET": _RPC,
    "spark.executorEnv.SPARK_JAVA_OPT_": "set by the operator: the executors' Spark properties",
    "spark.kubernetes.authenticate.": "set by the operator: the driver's credentials on the Kubernetes API",
    "spark.kubernetes.driver.container.image": "set by spec.spark.image",
    "spark.kubernetes.executor.container.image": "set by spec.spark.image",
    **{f"spark.kubernetes.{role}.{kind}.{prefix}": "set by the operator: the NetworkPolicies and the operator "
       "trust these labels" for role in ("driver", "executor") for kind in ("label", "annotation")
       for prefix in ("conveyor.dev/", "app.kubernetes.io/", "spark-")},
}
"""Prefixes of properties a user may not set whatever the operator's settings allow, with the
reason given."""

ALLOWED: tuple[str, ...] = (
    # memory, cores and their overheads (Spark's "Application Properties", "Running on Kubernetes")
    "spark.driver.memoryOverhead", "spark.driver.memoryOverheadFactor", "spark.driver.minMemoryOverhead",
    "spark.executor.memoryOverhead", "spark.executor.memoryOverheadFactor", "spark.executor.minMemoryOverhead",
    "spark.executor.pyspark.memory", "spark.driver.maxResultSize", "spark.kubernetes.memoryOverheadFactor",
    "spark.memory.fraction", "spark.memory.storageFraction", "spark.memory.offHeap.enabled",
    "spark.memory.offHeap.size", "spark.python.worker.memory", "spark.python.worker.reuse",
    "spark.python.worker.faulthandler.enabled", "spark.task.cpus",
    "spark.kubernetes.driver.request.cores", "spark.kubernetes.driver.limit.cores",
    "spark.kubernetes.executor.request.cores", "spark.kubernetes.executor.limit.cores",
    # timeouts and retries
    "spark.network.timeout", "spark.network.timeoutInterval", "spark.executor.heartbeatInterval",
    "spark.rpc.askTimeout", "spark.rpc.lookupTimeout", "spark.rpc.numRetries", "spark.rpc.retry.wait",
    "spark.task.maxFailures", "spark.stage.maxConsecutiveAttempts",
    "spark.kubernetes.driver.connectionTimeout", "spark.kubernetes.driver.requestTimeout",
    "spark.kubernetes.executor.apiPollingInterval", "spark.kubernetes.executor.missingPodDetectDelta",
    "spark.kubernetes.allocation.batch.size", "spark.kubernetes.allocation.batch.delay",
    # locality and placement
    "spark.locality.wait", "spark.locality.wait.*", "spark.kubernetes.node.selector.*",
    "spark.kubernetes.driver.node.selector.*", "spark.kubernetes.executor.node.selector.*",
    # storage: Spark's volume keys, checked by conveyor.spark_volumes
    "spark.kubernetes.driver.volumes.*", "spark.kubernetes.executor.volumes.*", "spark.kubernetes.local.dirs.tmpfs",
    # SQL and Arrow settings that name no class
    "spark.sql.shuffle.partitions", "spark.sql.session.timeZone", "spark.sql.execution.arrow.maxRecordsPerBatch",
    "spark.sql.execution.arrow.pyspark.enabled", "spark.ui.showConsoleProgress",
)
"""fnmatch globs (case-sensitive) of the ``sparkConf`` keys every connector may set."""

ALLOWED_ENV = "CONVEYOR_ALLOWED_SPARK_CONF"
"""Comma-separated globs of further ``sparkConf`` keys allowed, in the operator's and the
drivers' environment (the chart's ``connectors.allowedSparkConf``)."""

JAVA_OPTIONS_KEYS: tuple[str, ...] = tuple(
    f"spark.{role}.{kind}JavaOptions" for role in ("driver", "executor") for kind in ("extra", "default"))
"""JVM options whose ``-Dspark.`` system properties would set Spark properties behind the list."""

NOT_ALLOWED = ("not a property a connector may set (it may load code or change what the pods are); "
               f"the operator's connectors.allowedSparkConf ({ALLOWED_ENV}) can allow it")
"""Why a key that no allowed glob matches is refused (read after its field path)."""

SPARK_JAVA_OPTION = "-Dspark."
JAVA_OPTIONS_SET_SPARK = "-Dspark.* would set Spark properties; set them as sparkConf keys instead"
"""Why a :data:`JAVA_OPTIONS_KEYS` value holding :data:`SPARK_JAVA_OPTION` is refused."""


def admission_rules() -> list[dict[str, str]]:
    """``x-kubernetes-validations`` of ``spec.spark.sparkConf`` in the CRD: the keys no setting
    allows (:data:`OPERATOR_KEYS`, :data:`FORBIDDEN_PREFIXES`) refused at admission, the first
    such key named. The allow-list itself is the operator's and the driver's to apply, since
    the operator's setting widens it and the CRD is the same for every installation."""
    keys = ", ".join(f"'{k}'" for k in OPERATOR_KEYS)
    prefixes = ", ".join(f"'{p}'" for p in FORBIDDEN_PREFIXES)
    refused = f"k in [{keys}] || [{prefixes}].exists(p, k.startsWith(p))"
    return [{
        "rule": f"!self.exists(k, {refused})",
        "messageExpression": f"'key ' + self.filter(k, {refused})[0] + ' is set by the operator "
                             "(Spark RPC security, identity or labels of the pods); remove it'",
        "reason": "FieldValueForbidden",
    }]


def allowed_patterns(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The platform's extra allowed ``sparkConf`` globs, from :data:`ALLOWED_ENV` in
    ``environ`` (default ``os.environ``); ``()`` when unset."""
    raw = (os.environ if environ is None else environ).get(ALLOWED_ENV, "")
    return tuple(p.strip() for p in raw.split(",") if p.strip())


def refused_spark_conf(conf: Mapping[str, str], also_allowed: Iterable[str] = ()) -> dict[str, str]:
    """The keys of a user's ``spec.spark.sparkConf`` that are not the user's to set: the
    operator's properties and Spark's RPC security always, and any key that neither
    :data:`ALLOWED` nor ``also_allowed`` (fnmatch globs, the platform's) matches.

    Returns:
        ``{key: reason}`` in key order, ``{}`` when every key is allowed; reasons read after
        the field path, e.g. ``"set by spec.spark.image"``.
    """
    allowed = (*ALLOWED, *also_allowed)
    refused: dict[str, str] = {}
    for key in sorted(conf):
        if key in OPERATOR_KEYS:
            refused[key] = f"set by {OPERATOR_KEYS[key]}"
        elif prefix := next((p for p in FORBIDDEN_PREFIXES if key.startswith(p)), None):
            refused[key] = FORBIDDEN_PREFIXES[prefix]
        elif not any(fnmatchcase(key, pattern) for pattern in allowed):
            refused[key] = NOT_ALLOWED
        elif key in JAVA_OPTIONS_KEYS and SPARK_JAVA_OPTION in str(conf[key]):
            refused[key] = JAVA_OPTIONS_SET_SPARK
    return refused


def changed_enforced(conf: Mapping[str, str]) -> dict[str, str]:
    """The keys of ``conf`` that would change an :data:`ENFORCED` value (the same value, in
    any case and surrounding space, is not a change).

    Returns:
        ``{key: the value tried}``, ``{}`` when none.
    """
    return {key: conf[key] for key in sorted(conf)
            if key in ENFORCED and str(conf[key]).strip().lower() != ENFORCED[key].lower()}


def secret_file_properties(executor_pods: bool) -> dict[str, str]:
    """``spark.authenticate.secret.driver.file``, ``...executor.file`` and ``...file`` at :data:`SECRET_FILE`:
    both or neither, as Spark requires, and only with executor pods (Spark refuses the file
    keys on a local master). Without them Spark on Kubernetes would generate a secret and hand
    it to executors in their pods' ``_SPARK_AUTH_SECRET`` variable, readable by anyone who may
    read the pods (Spark's "Security" page, §Kubernetes).

    Returns:
        The three properties, or ``{}``.
    """
    if not executor_pods:
        return {}
    return {"spark.authenticate.secret.driver.file": SECRET_FILE,
            "spark.authenticate.secret.executor.file": SECRET_FILE,
            # what an executor's first RpcEnv (the driver-properties fetcher) reads: its
            # SecurityManager is built with the constructor's default, the generic key
            # (CoarseGrainedExecutorBackend, javap of Spark 4.3.0); without it executors on the node
            # fail "A secret key must be specified via the spark.authenticate.secret config".
            # That SecurityManager also needs spark.master (a k8s:// URL) to read any secret
            # file: the executor pod template passes it (conveyor_operator.reconcile.render).
            "spark.authenticate.secret.file": SECRET_FILE}
