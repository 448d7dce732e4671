"""The Connector's scale subresource, as a HorizontalPodAutoscaler and KEDA use it (issue 34,
item 3): ``spec.tasksMax`` as its replicas and ``status.selector`` as its label selector, the
field whose absence makes them refuse Strimzi's KafkaConnector (strimzi-kafka-operator#10450)."""

from __future__ import annotations

import json

from _objects import GROUP, PLURAL, VERSION, connector, eventually, unique_name
from kubernetes import client


def test_kubectl_autoscale_targets_a_connector_through_a_scale_subresource_with_its_pods_selector(
        kube_api, kube_namespace, operator, api):
    name = unique_name("hpa")
    selector = f"conveyor.dev/connector={name},conveyor.dev/component in (driver,executor)"
    with operator():
        api.create_connector(connector(name, kube_namespace, "noop-sink", "k:9092", {"topics": "t"}, tasksMax=2))
        eventually(lambda: ((api.get_connector(kube_namespace, name) or {}).get("status") or {}).get("selector"),
                   message="status.selector written by the reconcile")
        scale = api.custom.get_namespaced_custom_object_scale(GROUP, VERSION, kube_namespace, PLURAL, name)
        assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 2
        assert scale["status"] == {"replicas": 2, "selector": selector}

        template = api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace).spec.template.metadata.labels
        assert template["conveyor.dev/connector"] == name and template["conveyor.dev/component"] == "driver", \
            "the selector selects the driver's pods"

        kube_api.kubectl("autoscale", f"connectors.{GROUP}/{name}", "-n", kube_namespace,
                         "--min=1", "--max=4", "--cpu-percent=80")
        hpa = json.loads(kube_api.kubectl("get", "hpa", name, "-n", kube_namespace, "-o", "json").stdout)
        assert hpa["apiVersion"] == "autoscaling/v2"
        assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Connector", "name": name}
        assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 4)

        # what the HPA controller (or KEDA) does to scale: write the Scale's replicas
        api.custom.patch_namespaced_custom_object_scale(GROUP, VERSION, kube_namespace, PLURAL, name,
                                                         {"spec": {"replicas": 3}})
        assert api.get_connector(kube_namespace, name)["spec"]["tasksMax"] == 3
        eventually(lambda: api.custom.get_namespaced_custom_object_scale(
            GROUP, VERSION, kube_namespace, PLURAL, name)["status"]["replicas"] == 3,
                   message="status.tasksMax 3 once the operator applied the new tasksMax")
        client.AutoscalingV2Api(api.core.api_client).delete_namespaced_horizontal_pod_autoscaler(name, kube_namespace)


def test_an_enabled_autoscaler_owns_tasks_max_and_the_api_server_refuses_a_scale(chart, kube_namespace, api):
    """``spec.autoscaler`` enabled: the CRD's transition rule refuses a write of the Scale's
    replicas (``kubectl scale``, an HPA) and an edit of ``spec.tasksMax``, saying whose it is;
    with it disabled in the same write, the user takes the count back (issue 34, item 4)."""
    name = unique_name("owned")
    api.create_connector(connector(name, kube_namespace, "noop-sink", "k:9092", {"topics": "t"}, tasksMax=2,
                                   autoscaler={"minTasks": 1, "maxTasks": 4}))
    for write in (
        lambda: api.custom.patch_namespaced_custom_object_scale(GROUP, VERSION, kube_namespace, PLURAL, name,
                                                                 {"spec": {"replicas": 3}}),
        lambda: api.custom.patch_namespaced_custom_object(GROUP, VERSION, kube_namespace, PLURAL, name,
                                                           {"spec": {"tasksMax": 3}}),
    ):
        try:
            write()
        except client.ApiException as exc:
            assert exc.status == 422, exc.body
            assert "spec.tasksMax belongs to spec.autoscaler" in exc.body
        else:
            raise AssertionError("a change of tasksMax under an enabled autoscaler was accepted")
    assert api.get_connector(kube_namespace, name)["spec"]["tasksMax"] == 2
    api.custom.patch_namespaced_custom_object(GROUP, VERSION, kube_namespace, PLURAL, name,
                                              {"spec": {"tasksMax": 3, "autoscaler": {"enabled": False}}})
    api.custom.patch_namespaced_custom_object_scale(GROUP, VERSION, kube_namespace, PLURAL, name,
                                                     {"spec": {"replicas": 1}})
    assert api.get_connector(kube_namespace, name)["spec"]["tasksMax"] == 1
    try:
        api.custom.patch_namespaced_custom_object(GROUP, VERSION, kube_namespace, PLURAL, name,
                                                  {"spec": {"autoscaler": {"enabled": True, "minTasks": 5}}})
    except client.ApiException as exc:
        assert exc.status == 422 and "minTasks must not be above" in exc.body, exc.body
    else:
        raise AssertionError("minTasks above maxTasks was accepted")
    try:
        api.custom.patch_namespaced_custom_object(GROUP, VERSION, kube_namespace, PLURAL, name, {"spec": {
            "autoscaler": {"targetLagRecords": 100, "targetLagSeconds": 10}}})
    except client.ApiException as exc:
        assert exc.status == 422 and "one of targetLagRecords and targetLagSeconds" in exc.body, exc.body
    else:
        raise AssertionError("a target lag in records and in seconds was accepted")
