"""Spark RPC security (issue 13, item 3): the enforced properties, and the ``sparkConf`` keys a
manifest may not set, refused naming ``spec.spark.sparkConf.<key>``."""

from __future__ import annotations

import pytest

from conveyor import spark_security
from conveyor.manifest import ConnectorManifest, ManifestError

SECRET = "/etc/conveyor/control/spark-auth-secret"


def manifest(spark_conf, allowed_spark_conf=None):
    return ConnectorManifest.from_dict({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": "orders"},
        "spec": {"class": "noop-sink", "kafka": {"bootstrapServers": "k:1"}, "config": {"topics": "t"},
                 "spark": {"sparkConf": spark_conf}}}, allowed_spark_conf=allowed_spark_conf)


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
def test_java_options_may_not_set_spark_properties_even_where_the_platform_allows_them(key):
    with pytest.raises(ManifestError, match=f"spec.spark.sparkConf.{key}: -Dspark"):
        manifest({key: "-XX:+UseG1GC -Dspark.authenticate=false"}, allowed_spark_conf=["spark.*.*JavaOptions"])
    assert manifest({key: "-XX:+UseG1GC -Dio.netty.tryReflectionSetAccessible=true"},
                    allowed_spark_conf=["spark.*.*JavaOptions"])


CODE_LOADING = {
    # each of these puts code of the manifest's author into the driver or the executors
    "spark.jars": "https://example.invalid/evil.jar",
    "spark.jars.packages": "org.evil:evil:1.0",
    "spark.jars.repositories": "https://example.invalid/maven",
    "spark.jars.ivySettings": "/tmp/ivy.xml",
    "spark.plugins": "org.evil.Plugin",
    "spark.executor.plugins": "org.evil.Plugin",
    "spark.extraListeners": "org.evil.Listener",
    "spark.submit.pyFiles": "https://example.invalid/evil.zip",
    "spark.files": "https://example.invalid/sitecustomize.py",
    "spark.archives": "https://example.invalid/env.tar.gz#env",
    "spark.python.worker.module": "evil",
    "spark.python.daemon.module": "evil",
    "spark.executorEnv.LD_PRELOAD": "/tmp/evil.so",
    "spark.executorEnv.PYTHONPATH": "/tmp/evil",
    "spark.executorEnv.PYTHONSTARTUP": "/tmp/evil.py",
    "spark.driver.extraClassPath": "/tmp/evil.jar",
    "spark.executor.extraClassPath": "/tmp/evil.jar",
    "spark.driver.extraLibraryPath": "/tmp",
    "spark.executor.extraLibraryPath": "/tmp",
    "spark.driver.extraJavaOptions": "-javaagent:/tmp/evil.jar",
    "spark.executor.extraJavaOptions": "-XX:OnOutOfMemoryError=/bin/sh",
    "spark.driver.defaultJavaOptions": "-javaagent:/tmp/evil.jar",
    "spark.sql.extensions": "org.evil.Extensions",
    "spark.sql.queryExecutionListeners": "org.evil.Listener",
    "spark.sql.streaming.streamingQueryListeners": "org.evil.Listener",
    "spark.sql.catalog.evil": "org.evil.Catalog",
    "spark.serializer": "org.evil.Serializer",
    "spark.kryo.registrator": "org.evil.Registrator",
    "spark.io.compression.codec": "org.evil.Codec",
    "spark.shuffle.manager": "org.evil.ShuffleManager",
    "spark.kubernetes.executor.podTemplateFile": "/tmp/pod.yaml",
    "spark.kubernetes.driver.pod.featureSteps": "org.evil.Step",
    "spark.kubernetes.executor.pod.featureSteps": "org.evil.Step",
    "spark.kubernetes.executor.secrets.other-connector-control": "/mnt",
    "spark.kubernetes.executor.secretKeyRef.TOKEN": "other-connector-control:admin-token",
    "spark.kubernetes.executor.label.conveyor.dev/connector": "another-connector",
    "spark.kubernetes.executor.annotation.container.apparmor.security.beta.kubernetes.io/executor": "unconfined",
    "spark.ui.enabled": "true",
    "spark.eventLog.enabled": "true",
}


@pytest.mark.parametrize("key", sorted(CODE_LOADING))
def test_a_property_that_loads_code_or_changes_the_pods_is_refused_naming_it(key):
    with pytest.raises(ManifestError) as refused:
        manifest({key: CODE_LOADING[key]})
    assert f"spec.spark.sparkConf.{key}: " in str(refused.value)


def test_the_platforms_globs_allow_more_but_never_the_operators_keys_labels_or_rpc_security(monkeypatch):
    platform = ["spark.jars.packages", "spark.kubernetes.executor.label.*", "spark.eventLog.*"]
    wanted = {"spark.jars.packages": "org.example:lib:1.0", "spark.kubernetes.executor.label.team": "data",
              "spark.eventLog.enabled": "true"}
    assert manifest(wanted, allowed_spark_conf=platform).spec.spark.spark_conf == wanted
    monkeypatch.setenv(spark_security.ALLOWED_ENV, " , ".join(platform))
    assert manifest(wanted).spec.spark.spark_conf == wanted  # the drivers read the operator's setting from here
    with pytest.raises(ManifestError) as refused:
        manifest({"spark.kubernetes.executor.label.conveyor.dev/connector": "other", "spark.master": "local",
                  "spark.authenticate": "false"}, allowed_spark_conf=["*"])
    assert [line.split(": ")[0].strip() for line in str(refused.value).splitlines()[1:]] == [
        "spec.spark.sparkConf.spark.authenticate", "spec.spark.sparkConf.spark.kubernetes.executor.label.conveyor.dev/connector",
        "spec.spark.sparkConf.spark.master"]


def test_unknown_keys_are_refused_and_the_message_says_how_to_allow_them():
    with pytest.raises(ManifestError) as refused:
        manifest({"spark.custom": "1"})
    assert ("spec.spark.sparkConf.spark.custom: not a property a connector may set" in str(refused.value)
            and "connectors.allowedSparkConf" in str(refused.value))


@pytest.mark.parametrize("key, value", [
    ("spark.executor.memoryOverhead", "512m"), ("spark.network.timeout", "300s"),
    ("spark.executor.heartbeatInterval", "20s"), ("spark.locality.wait.node", "0"),
    ("spark.kubernetes.node.selector.topology.kubernetes.io/zone", "a"),
    ("spark.kubernetes.executor.node.selector.pool", "connectors"),
    ("spark.kubernetes.executor.volumes.emptyDir.scratch.mount.path", "/scratch"),
    ("spark.kubernetes.driver.limit.cores", "2"),
])
def test_what_a_connectors_author_tunes_is_allowed(key, value):
    assert manifest({key: value}).spec.spark.spark_conf == {key: value}


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


@pytest.mark.parametrize("key", ["consumer.override.plugin.library.paths", "producer.override.ssl.engine.location",
                                 "admin.override.ssl.providers", "consumer.override.sasl.kerberos.kinit.cmd",
                                 "plugin.library.paths"])
def test_kafka_client_properties_that_load_code_are_refused_naming_the_key(key):
    with pytest.raises(ManifestError) as refused:
        ConnectorManifest.from_dict({
            "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": "orders"},
            "spec": {"class": "noop-sink", "kafka": {"bootstrapServers": "k:1"},
                     "config": {"topics": "t", key: "/tmp/evil.so"}}})
    assert f"spec.config.{key}: librdkafka's " in str(refused.value)
