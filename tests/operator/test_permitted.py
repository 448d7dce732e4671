"""The operator's allow-lists of images and ServiceAccounts (issue 13 item 4): what a Connector
may name in ``spec.spark.image`` and ``spec.spark.serviceAccount``."""

import pytest
from conveyor_operator.reconcile import render
from conveyor_operator.settings import OperatorSettings, default_allowed_images, image_repository
from conveyor_operator.validate.checks import not_permitted

from conveyor.manifest import ConnectorManifest

SETTINGS = OperatorSettings(runtime_image="registry.example:5000/team/conveyor:1.2.3")


def manifest(**spark):
    return ConnectorManifest.from_dict({
        "apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": "c", "namespace": "data"},
        "spec": {"class": "noop-sink", "kafka": {"bootstrapServers": "k:9092"}, "config": {"topics": "t"},
                 "spark": spark}})


@pytest.mark.parametrize(("image", "repository"), [
    ("conveyor", "conveyor"), ("conveyor:0.1.0", "conveyor"),
    ("registry.example:5000/team/conveyor:1.2.3", "registry.example:5000/team/conveyor"),
    ("registry.example:5000/team/conveyor", "registry.example:5000/team/conveyor"),
    ("reg/conveyor:1@sha256:" + "a" * 64, "reg/conveyor"), ("reg/conveyor@sha256:" + "a" * 64, "reg/conveyor"),
])
def test_the_repository_of_an_image_drops_tag_and_digest(image, repository):
    assert image_repository(image) == repository


def test_by_default_only_the_runtime_images_repository_and_conveyor_spark_are_allowed():
    assert SETTINGS.image_patterns() == default_allowed_images(SETTINGS.runtime_image)
    assert SETTINGS.allowed_service_accounts == ["conveyor-spark"]
    assert not_permitted(manifest(), SETTINGS) == "", "unset fields are the operator's own choice"
    for image in ("registry.example:5000/team/conveyor", "registry.example:5000/team/conveyor:2.0",
                  "registry.example:5000/team/conveyor@sha256:" + "b" * 64,
                  "registry.example:5000/team/conveyor:2.0@sha256:" + "b" * 64):
        assert not_permitted(manifest(image=image), SETTINGS) == "", image
    assert not_permitted(manifest(serviceAccount="conveyor-spark"), SETTINGS) == ""


@pytest.mark.parametrize("image", [
    "evil/image:1", "registry.example:5000/team/conveyor-evil:1", "registry.example:5000/team/conveyorx",
    "registry.example:5000/other/conveyor:1", "registry.example:5000/team/conveyor/sub:1", "docker.io/conveyor:1",
])
def test_other_images_are_not_allowed_naming_the_field_and_the_setting(image):
    assert not_permitted(manifest(image=image), SETTINGS) == \
        f"spec.spark.image: {image!r} is not allowed (connectors.allowedImages)"


@pytest.mark.parametrize("image", ["registry.example:5000/team/conveyor:1/../evil:2", "Conveyor:1", "a b", ""])
def test_what_is_not_an_image_reference_is_refused_before_any_pattern(image):
    wide = OperatorSettings(allowed_images=["*"])
    assert not_permitted(manifest(image=image), wide) == f"spec.spark.image: {image!r} is not an image reference"


def test_other_service_accounts_are_not_allowed_and_both_fields_are_named():
    assert not_permitted(manifest(serviceAccount="default", image="evil/image:1"), SETTINGS).splitlines() == [
        "spec.spark.image: 'evil/image:1' is not allowed (connectors.allowedImages)",
        "spec.spark.serviceAccount: 'default' is not allowed (connectors.allowedServiceAccounts)"]


def test_the_settings_come_from_the_charts_variables():
    settings = OperatorSettings.from_env({
        "CONVEYOR_OPERATOR_RUNTIME_IMAGE": "conveyor:0.1.0",
        "CONVEYOR_OPERATOR_ALLOWED_IMAGES": "registry.example/team/*, conveyor:0.1.*",
        "CONVEYOR_OPERATOR_ALLOWED_SERVICE_ACCOUNTS": "conveyor-spark,spark-*"})
    assert settings.image_patterns() == ["registry.example/team/*", "conveyor:0.1.*"]
    assert not_permitted(manifest(image="registry.example/team/sink:3", serviceAccount="spark-etl"), settings) == ""
    assert "connectors.allowedImages" in not_permitted(manifest(image="conveyor:0.2.0"), settings)
    empty = OperatorSettings.from_env({"CONVEYOR_OPERATOR_RUNTIME_IMAGE": "conveyor:0.1.0",
                                       "CONVEYOR_OPERATOR_ALLOWED_IMAGES": ""})
    assert empty.image_patterns() == ["conveyor", "conveyor:*", "conveyor@*"], "empty: the default"


def test_naming_conveyor_spark_still_gets_the_namespaces_driver_rbac():
    kinds = [(o["kind"], o["metadata"]["name"]) for o in
             render.namespace_objects(manifest(serviceAccount="conveyor-spark"), SETTINGS)]
    assert ("RoleBinding", "conveyor-spark") in kinds


def test_allowed_spark_conf_is_a_comma_list_of_globs():
    settings = OperatorSettings.from_env({"CONVEYOR_OPERATOR_ALLOWED_SPARK_CONF": "spark.jars.packages, spark.eventLog.*"})
    assert settings.allowed_spark_conf == ["spark.jars.packages", "spark.eventLog.*"]
    assert OperatorSettings.from_env({}).allowed_spark_conf == []
