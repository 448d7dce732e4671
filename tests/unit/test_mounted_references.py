"""Mounted references stay inside their mount (issue 28, item 1): a Secret or ConfigMap key is
``[-._a-zA-Z0-9]+`` (not ``.`` or ``..``, not starting with ``..``), refused by the model naming
the field, and checked again where the file is read, symlinks followed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conveyor.manifest import ConnectorManifest, ManifestError, resolve_mounted_config
from conveyor.manifest.mounts import mounted_file

TRAVERSALS = ["/var/run/secrets/kubernetes.io/serviceaccount/token", "../../../etc/passwd", "..", ".",
              "..data", "a/b", "../other-connector-control/admin-token"]


def manifest(spec_patch):
    spec = {"class": "noop-sink", "kafka": {"bootstrapServers": "k:1"}, "config": {"topics": "t"}}
    spec.update(spec_patch)
    return ConnectorManifest.from_dict({"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
                                        "metadata": {"name": "orders"}, "spec": spec})


def kubelet_secret(root: Path, kind: str, name: str, items: dict[str, str]) -> Path:
    """A Secret or ConfigMap volume laid out as the kubelet writes it: the keys are symlinks
    to ``..data/<key>``, ``..data`` a symlink to a timestamped directory."""
    directory = root / kind / name
    data = directory / "..2026_11_28_00_00_00.000000001"
    data.mkdir(parents=True)
    for key, value in items.items():
        (data / key).write_text(value)
        os.symlink(f"..data/{key}", directory / key)
    os.symlink(data.name, directory / "..data")
    return directory


@pytest.mark.parametrize("key", TRAVERSALS)
@pytest.mark.parametrize("where, field", [
    ({"kafka": {"bootstrapServers": "k:1", "authentication": {
        "type": "plain", "username": "u", "passwordSecret": {"name": "kafka", "key": "KEY"}}}},
     "spec.kafka.authentication.passwordSecret.key"),
    ({"kafka": {"bootstrapServers": "k:1", "tls": {"trustedCertificate": {"name": "ca", "key": "KEY"}}}},
     "spec.kafka.tls.trustedCertificate.key"),
    ({"kafka": {"bootstrapServers": "k:1", "tls": {"certificate": {"name": "c", "key": "tls.crt"},
                                                   "key": {"name": "c", "key": "KEY"}}}},
     "spec.kafka.tls.key.key"),
    ({"config": {"topics": "t", "connection.password": "${secret:pg:KEY}"}, "configFrom": [{"secretRef": {"name": "pg"}}]},
     "spec.config.connection.password"),
    ({"config": {"topics": "t", "connection.url": "postgresql://h/${configmap:pg:KEY}"},
      "configFrom": [{"configMapRef": {"name": "pg"}}]},
     "spec.config.connection.url"),
])
def test_a_key_that_is_not_a_kubernetes_key_is_refused_naming_the_field(key, where, field):
    patch = json.loads(json.dumps(where).replace("KEY", key))
    with pytest.raises(ManifestError) as refused:
        manifest(patch)
    assert f"{field}: " in str(refused.value) and "is not a Secret or ConfigMap key" in str(refused.value)


@pytest.mark.parametrize("key", ["password", "tls.crt", ".hidden", "a..b", "CA_bundle-2.pem"])
def test_kubernetes_keys_are_accepted(key):
    m = manifest({"config": {"topics": "t", "x": f"${{secret:pg:{key}}}"}, "configFrom": [{"secretRef": {"name": "pg"}}]})
    assert m.spec.config["x"] == f"${{secret:pg:{key}}}"


@pytest.mark.parametrize("key", TRAVERSALS)
def test_the_reader_refuses_a_key_outside_the_mount_whatever_the_model_let_through(tmp_path, key):
    kubelet_secret(tmp_path, "secrets", "pg", {"password": "p"})
    with pytest.raises(ManifestError) as refused:
        mounted_file(tmp_path, "secret", "pg", key, "spec.config.connection.password")
    assert str(refused.value).startswith("spec.config.connection.password: ")


def test_the_reader_follows_the_kubelets_symlinks_but_not_one_out_of_the_mount(tmp_path):
    directory = kubelet_secret(tmp_path, "secrets", "pg", {"password": "s3cret-value"})
    assert mounted_file(tmp_path, "secret", "pg", "password", "f").read_text() == "s3cret-value"
    outside = tmp_path / "token"
    outside.write_text("the pod's service account token")
    os.symlink(outside, directory / "stolen")
    with pytest.raises(ManifestError, match="spec.config.x: key 'stolen' of secret 'pg' leads outside its mount"):
        mounted_file(tmp_path, "secret", "pg", "stolen", "spec.config.x")


def test_config_from_and_references_read_through_the_checked_reader(tmp_path):
    directory = kubelet_secret(tmp_path, "secrets", "pg", {"password": "s3cret-value"})
    spec = manifest({"config": {"topics": "t", "connection.password": "${secret:pg:password}"},
                     "configFrom": [{"secretRef": {"name": "pg"}, "prefix": "pg."}]}).spec
    assert resolve_mounted_config(spec, tmp_path)["connection.password"] == "s3cret-value"
    assert resolve_mounted_config(spec, tmp_path)["pg.password"] == "s3cret-value"
    (tmp_path / "token").write_text("the pod's service account token")
    os.symlink(tmp_path / "token", directory / "stolen")
    with pytest.raises(ManifestError, match=r"spec.configFrom\[0\]: key 'stolen' of secret 'pg' leads outside"):
        resolve_mounted_config(spec, tmp_path)
    (directory / "stolen").unlink()
    unchecked = spec.model_copy(update={"config": {"x": "${secret:pg:../../token}"}})  # not validated again
    with pytest.raises(ManifestError, match="spec.config.x: '../../token' is not a Secret or ConfigMap key"):
        resolve_mounted_config(unchecked, tmp_path)


def test_kafka_credentials_are_read_through_the_checked_reader(tmp_path):
    directory = kubelet_secret(tmp_path, "secrets", "kafka", {"password": "kafka-pass"})
    spec = manifest({"kafka": {"bootstrapServers": "k:1", "authentication": {
        "type": "plain", "username": "u", "passwordSecret": {"name": "kafka", "key": "password"}}}}).spec
    assert spec.kafka.client_properties(tmp_path)["sasl.password"] == "kafka-pass"
    os.symlink(tmp_path / "elsewhere", directory / "password2")
    (tmp_path / "elsewhere").write_text("x")
    moved = spec.kafka.authentication.password_secret.model_copy(update={"key": "password2"})
    sasl = spec.kafka.authentication.model_copy(update={"password_secret": moved})
    with pytest.raises(ManifestError, match="spec.kafka.authentication.passwordSecret: key 'password2' of secret"):
        spec.kafka.model_copy(update={"authentication": sasl}).client_properties(tmp_path)


def test_kafka_tls_material_goes_in_as_pem_text_so_executors_need_no_mount(tmp_path):
    kubelet_secret(tmp_path, "secrets", "kafka-tls", {"ca.crt": "-----BEGIN CERTIFICATE-----\nCA\n",
                                                      "tls.crt": "-----BEGIN CERTIFICATE-----\nME\n",
                                                      "tls.key": "-----BEGIN PRIVATE KEY-----\nK\n"})
    spec = manifest({"kafka": {"bootstrapServers": "k:1", "tls": {
        "trustedCertificate": {"name": "kafka-tls", "key": "ca.crt"}, "certificate": {"name": "kafka-tls", "key": "tls.crt"},
        "key": {"name": "kafka-tls", "key": "tls.key"}}}}).spec
    props = spec.kafka.client_properties(tmp_path)
    assert props == {"bootstrap.servers": "k:1", "security.protocol": "SSL",
                     "ssl.ca.pem": "-----BEGIN CERTIFICATE-----\nCA\n",
                     "ssl.certificate.pem": "-----BEGIN CERTIFICATE-----\nME\n",
                     "ssl.key.pem": "-----BEGIN PRIVATE KEY-----\nK\n"}
    assert not any(key.endswith(".location") for key in props)
