"""Spark's RPC security for a connector's driver and executors, and the ``sparkConf`` keys a
user may not set (issue 13, item 3). Pure: no Spark, Kafka or Kubernetes import, so that the
manifest, the driver and the operator share one list.

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

from collections.abc import Mapping

ENFORCED: dict[str, str] = {
    "spark.authenticate": "true",
    "spark.network.crypto.enabled": "true",
    "spark.network.crypto.authEngineVersion": "2",
    "spark.network.crypto.cipher": "AES/GCM/NoPadding",
    "spark.network.crypto.saslFallback": "false",
}
"""Spark properties every driver runs with, on every master; applied last (see
:func:`conveyor.runtime.spark_session.spark_properties`)."""

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
}
"""Prefixes of properties a user may not set, with the reason given."""

JAVA_OPTIONS_KEYS: tuple[str, ...] = tuple(
    f"spark.{role}.{kind}JavaOptions" for role in ("driver", "executor") for kind in ("extra", "default"))
"""JVM options whose ``-Dspark.`` system properties would set Spark properties behind the list."""


def refused_spark_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """The keys of a user's ``spec.spark.sparkConf`` that are not the user's to set.

    Returns:
        ``{key: reason}`` in key order, ``{}`` when every key is allowed; reasons read after
        the field path, e.g. ``"set by spec.spark.image"``.
    """
    refused: dict[str, str] = {}
    for key in sorted(conf):
        if key in OPERATOR_KEYS:
            refused[key] = f"set by {OPERATOR_KEYS[key]}"
        elif prefix := next((p for p in FORBIDDEN_PREFIXES if key.startswith(p)), None):
            refused[key] = FORBIDDEN_PREFIXES[prefix]
        elif key in JAVA_OPTIONS_KEYS and "-Dspark." in str(conf[key]):
            refused[key] = "-Dspark.* would set Spark properties; set them as sparkConf keys instead"
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
            # file: the executor pod template passes it (conveyor_operator.render).
            "spark.authenticate.secret.file": SECRET_FILE}
