"""Spark RPC security (issue 13, item 3): the enforced properties, and the ``sparkConf`` keys a
manifest may not set, refused naming ``spec.spark.sparkConf.<key>``."""

from __future__ import annotations

import pytest

from conveyor import spark_security
from conveyor.manifest import ConnectorManifest, ManifestError

SECRET = "/etc/conveyor/control/spark-auth-secret"


def manifest(spark_conf):
    return ConnectorManifest.from_dict({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": "orders"},
        "spec": {"class": "noop-sink", "kafka": {"bootstrapServers": "k:1"}, "config": {"topics": "t"},
                 "spark": {"sparkConf": spark_conf}}})


def test_the_enforced_properties_are_sparks_rpc_authentication_and_aes_gcm():
    assert spark_security.ENFORCED == {
        "spark.authenticate": "true",
        "spark.network.crypto.enabled": "true",
        "spark.network.crypto.authEngineVersion": "2",
        "spark.network.crypto.cipher": "AES/GCM/NoPadding",
        "spark.network.crypto.saslFallback": "false",
    }


def test_secret_files_are_both_or_neither_and_only_with_executor_pods():
    assert spark_security.secret_file_properties(executor_pods=True) == {
        "spark.authenticate.secret.driver.file": SECRET, "spark.authenticate.secret.executor.file": SECRET,
        "spark.authenticate.secret.file": SECRET}
    assert spark_security.secret_file_properties(executor_pods=False) == {}


@pytest.mark.parametrize("key", sorted(spark_security.OPERATOR_KEYS))
def test_each_operator_key_is_refused_naming_it(key):
    with pytest.raises(ManifestError) as refused:
        manifest({key: "x"})
    assert f"spec.spark.sparkConf.{key}: set by " in str(refused.value)


@pytest.mark.parametrize("key", [
    "spark.authenticate", "spark.authenticate.secret", "spark.authenticate.secret.file",
    "spark.authenticate.secret.driver.file", "spark.authenticate.secret.executor.file",
    "spark.authenticate.enableSaslEncryption", "spark.network.crypto.enabled", "spark.network.crypto.cipher",
    "spark.network.crypto.authEngineVersion", "spark.network.crypto.saslFallback",
    "spark.network.sasl.serverAlwaysEncrypt", "spark.ssl.rpc.enabled", "spark.ssl.enabled",
    "spark.executorEnv._SPARK_AUTH_SECRET", "spark.kubernetes.executor.secretKeyRef._SPARK_AUTH_SECRET",
])
def test_spark_rpc_security_cannot_be_turned_off_or_keyed(key):
    with pytest.raises(ManifestError) as refused:
        manifest({key: "false"})
    assert f"spec.spark.sparkConf.{key}: set by the operator: Spark RPC is always authenticated" in str(refused.value)


@pytest.mark.parametrize("key", [
    "spark.kubernetes.authenticate.oauthToken", "spark.kubernetes.authenticate.executor.serviceAccountName",
    "spark.kubernetes.driver.container.image", "spark.kubernetes.executor.container.image",
    "spark.executorEnv.SPARK_JAVA_OPT_0",
])
def test_identity_image_and_executor_options_are_the_operators(key):
    with pytest.raises(ManifestError, match=f"spec.spark.sparkConf.{key}: set by"):
        manifest({key: "x"})


@pytest.mark.parametrize("key", spark_security.JAVA_OPTIONS_KEYS)
def test_java_options_may_not_set_spark_properties(key):
    with pytest.raises(ManifestError, match=f"spec.spark.sparkConf.{key}: -Dspark"):
        manifest({key: "-XX:+UseG1GC -Dspark.authenticate=false"})
    assert manifest({key: "-XX:+UseG1GC -Dio.netty.tryReflectionSetAccessible=true"})


def test_every_refused_key_gets_its_own_line_and_other_keys_pass():
    with pytest.raises(ManifestError) as refused:
        manifest({"spark.authenticate": "false", "spark.kubernetes.container.image": "evil:1",
                  "spark.executor.pyspark.memory": "512m"})
    lines = str(refused.value).splitlines()[1:]
    assert lines == [
        ("  spec.spark.sparkConf.spark.authenticate: set by the operator: Spark RPC is always authenticated and "
         "encrypted"),
        "  spec.spark.sparkConf.spark.kubernetes.container.image: set by spec.spark.image",
    ]
    allowed = {"spark.executor.pyspark.memory": "512m", "spark.kubernetes.executor.request.cores": "250m",
               "spark.task.maxFailures": "8", "spark.sql.shuffle.partitions": "4"}
    assert manifest(allowed).spec.spark.spark_conf == allowed
    assert spark_security.refused_spark_conf(allowed) == {}


def test_changed_enforced_ignores_case_and_space_of_the_same_value():
    assert spark_security.changed_enforced({"spark.authenticate": " TRUE ", "spark.other": "x"}) == {}
    assert spark_security.changed_enforced({"spark.network.crypto.cipher": "AES/CTR/NoPadding"}) == {
        "spark.network.crypto.cipher": "AES/CTR/NoPadding"}
