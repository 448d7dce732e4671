"""Spark's volume properties (spark.kubernetes.<role>.volumes.*) read from a Connector's sparkConf."""

import re

import pytest

from conveyor import spark_volumes
from conveyor.manifest import ConnectorManifest, ManifestError

PREFIX = "spark.kubernetes.driver.volumes"


def test_properties_group_into_volumes_by_type_and_name():
    (emptydir, share) = spark_volumes.volumes({
        f"{PREFIX}.persistentVolumeClaim.share.mount.path": "/share",
        f"{PREFIX}.persistentVolumeClaim.share.mount.subPath": "a",
        f"{PREFIX}.persistentVolumeClaim.share.options.claimName": "exports",
        f"{PREFIX}.persistentVolumeClaim.share.options.readOnly": "TRUE",
        f"{PREFIX}.emptyDir.cache.mount.path": "/cache", f"{PREFIX}.emptyDir.cache.options.medium": "Memory",
        "spark.kubernetes.executor.volumes.emptyDir.x.mount.path": "/x",  # another role
        "spark.executor.memory": "1g",
    }, "driver")
    assert emptydir.volume() == {"name": "cache", "emptyDir": {"medium": "Memory"}}
    assert share.volume() == {"name": "share", "persistentVolumeClaim": {"claimName": "exports", "readOnly": True}}
    assert share.volume_mount() == {"name": "share", "mountPath": "/share", "subPath": "a"}


@pytest.mark.parametrize("type_", ["hostPath", "nfs"])
@pytest.mark.parametrize("role", ["driver", "executor"])
def test_host_path_and_nfs_volumes_are_refused_naming_the_key(type_, role):
    """Pod Security Standards "restricted" admits neither; a PersistentVolume of that type, bound
    to a claim, is the way in."""
    key = f"spark.kubernetes.{role}.volumes.{type_}.data.mount.path"
    with pytest.raises(ValueError, match=rf"^{re.escape(key)}: {type_} volumes are refused: .*'restricted'.*"
                                         r"persistentVolumeClaim"):
        spark_volumes.volumes({key: "/data", f"spark.kubernetes.{role}.volumes.{type_}.data.options.path": "/p"},
                              role)


@pytest.mark.parametrize(("conf", "message"), [
    ({f"{PREFIX}.gitRepo.x.mount.path": "/x"}, "volume type 'gitRepo' is not one of"),
    ({f"{PREFIX}.emptyDir.X.mount.path": "/x"}, "must be a DNS label"),
    ({f"{PREFIX}.emptyDir.tmp.mount.path": "/x"}, "'tmp' is reserved"),
    ({f"{PREFIX}.emptyDir.secret-0.mount.path": "/x"}, "'secret-0' is reserved"),
    ({f"{PREFIX}.emptyDir.x.mount.where": "/x"}, "unknown property 'mount.where'"),
    ({f"{PREFIX}.emptyDir.x.options.medium": "Memory"}, f"{PREFIX}.emptyDir.x.mount.path: an absolute path"),
    ({f"{PREFIX}.persistentVolumeClaim.x.mount.path": "/x"},
     f"{PREFIX}.persistentVolumeClaim.x.options.claimName: required"),
    ({f"{PREFIX}.emptyDir.x.mount.path": "/x", f"{PREFIX}.emptyDir.x.options.claimName": "c"},
     "options.claimName: not an option of emptyDir"),
    ({f"{PREFIX}.emptyDir.x.mount.path": "/x", f"{PREFIX}.emptyDir.x.mount.readOnly": "yes"}, "true or false"),
    ({f"{PREFIX}.persistentVolumeClaim.x.mount.path": "/x",
      f"{PREFIX}.persistentVolumeClaim.x.options.claimName": "OnDemand"}, "OnDemand claims are Spark's"),
])
def test_malformed_properties_are_refused_naming_the_property(conf, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        spark_volumes.volumes(conf, "driver")


def test_a_manifest_with_a_malformed_volume_is_refused_naming_spark_conf():
    with pytest.raises(ManifestError) as refused:
        ConnectorManifest.from_dict({"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
                                     "metadata": {"name": "c"},
                                     "spec": {"class": "noop-sink", "config": {"topics": "t"}, "spark": {
                                         "sparkConf": {"spark.kubernetes.executor.volumes.hostPath.a.mount.path": "/a"}}}})
    assert "spec.spark.sparkConf" in str(refused.value)
    assert "spark.kubernetes.executor.volumes.hostPath.a.mount.path: hostPath volumes are refused" in str(refused.value)


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("spark.kubernetes.driver.request.cores", "250 m", "a Kubernetes CPU quantity"),
    ("spark.kubernetes.executor.limit.cores", "two", "a Kubernetes CPU quantity"),
    ("spark.executor.pyspark.memory", "1.5g", "a Spark memory size"),
])
def test_sizing_properties_the_operator_reads_are_checked(key, value, expected):
    spec = {"class": "noop-sink", "kafka": {"bootstrapServers": "k:9092"}, "config": {"topics": "t"},
            "spark": {"sparkConf": {key: value}}}
    with pytest.raises(ManifestError) as refused:
        ConnectorManifest.from_dict({"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
                                     "metadata": {"name": "c"}, "spec": spec})
    assert f"{key}: {value!r} is not {expected}" in str(refused.value)
    for good in ("250m", "0.5", "2") if "cores" in key else ("384m", "1g", "1024"):
        spec["spark"]["sparkConf"][key] = good
        ConnectorManifest.from_dict({"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
                                     "metadata": {"name": "c"}, "spec": spec})
