"""The operator end to end against a real kube-apiserver (envtest-style: no kubelet, no
controllers), installed with the Helm chart and acting as the chart's ServiceAccount.

Where a pod must run, the test runs the real ``conveyor run`` locally from the manifest
the operator rendered into the ConfigMap, and points the operator at its control API.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest
import yaml
from _admission import chart_policy_only_warns
from _drivers import LocalDriver
from _objects import GROUP, PLURAL, VERSION, Api, connector, eventually, unique_name
from confluent_kafka.admin import AdminClient, NewTopic
from kubernetes import client

from conveyor.control.auth import ControlTokens
from conveyor.control.protocol import current_pod
from conveyor.testing.ports import free_port
from conveyor.testing.runs import committed_offsets, produce

pytestmark = pytest.mark.integration


_name = unique_name


# --- install, CRD, explain ----------------------------------------------------------------------

def test_helm_install_establishes_the_crd_and_kubectl_explains_it(kube_api, chart):
    def established():
        crd = json.loads(kube_api.kubectl("get", "crd", "connectors.conveyor.dev", "-o", "json").stdout)
        return {c["type"]: c["status"] for c in crd["status"].get("conditions", [])}.get("Established") == "True"

    eventually(established, timeout_s=30, message="CRD Established")
    # the apiserver publishes a new CRD's OpenAPI a moment after it is Established
    explained = eventually(lambda: kube_api.kubectl("explain", "connector.spec", check=False).stdout,
                           timeout_s=60, message="kubectl explain connector.spec")
    assert "tasksMax" in explained and "Maximum number of tasks" in explained
    explained = kube_api.kubectl("explain", "connector.spec.deletionPolicy.offsets").stdout
    assert "tombstones the source offsets" in explained
    dep = json.loads(kube_api.kubectl("get", "deployment", "-n", chart["namespace"], "-o", "json").stdout)["items"]
    assert len(dep) == 1 and dep[0]["spec"]["strategy"]["type"] == "Recreate"


# --- apply, render, validation, scale -------------------------------------------------------------

def test_apply_creates_owned_objects_and_scale_changes_tasks_max(kube_api, kube_namespace, operator, api):
    name = _name("orders")
    body = connector(name, kube_namespace, "noop-sink", "kafka:9092", {"topics": "orders"}, tasksMax=1,
                     shutdown={"gracePeriodSeconds": 20})
    with operator():
        kube_api.kubectl("apply", "-f", "-", input=yaml.safe_dump(body))
        dep = eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace),
                         message="driver Deployment")
        uid = api.get_connector(kube_namespace, name)["metadata"]["uid"]
        assert dep.metadata.owner_references[0].uid == uid
        assert dep.spec.replicas == 1 and dep.spec.strategy.type == "Recreate"
        pod = dep.spec.template.spec
        assert pod.termination_grace_period_seconds == 35
        assert pod.service_account_name == "conveyor-spark"
        driver = pod.containers[0]
        assert driver.lifecycle.pre_stop._exec.command[:2] == ["conveyor", "drain"]
        assert "spark.kubernetes.driver.pod.name=$(POD_NAME)" in driver.args
        assert f"spark.kubernetes.namespace={kube_namespace}" in driver.args
        assert any(e.name == "POD_NAME" and e.value_from.field_ref.field_path == "metadata.name" for e in driver.env)

        manifest = yaml.safe_load(api.core.read_namespaced_config_map(f"{name}-connector", kube_namespace)
                                  .data["connector.yaml"])
        assert manifest["spec"]["config"] == {"topics": "orders"} and manifest["spec"]["tasksMax"] == 1
        svc = api.core.read_namespaced_service(f"{name}-driver", kube_namespace)
        assert svc.spec.cluster_ip == "None" and {p.port for p in svc.spec.ports} >= {8083, 7078, 7079}
        binding = api.rbac.read_namespaced_role_binding("conveyor-spark", kube_namespace)
        assert not binding.metadata.owner_references  # shared by the namespace's connectors
        assert binding.role_ref.kind == "ClusterRole" and binding.role_ref.name.endswith("spark-driver")
        role = api.rbac.read_cluster_role(binding.role_ref.name)
        assert any("pods" in r.resources and "create" in r.verbs for r in role.rules)
        api.core.read_namespaced_service_account("conveyor-spark", kube_namespace)
        template = yaml.safe_load(api.core.read_namespaced_config_map(f"{name}-connector", kube_namespace)
                                  .data["executor-pod.yaml"])
        assert template["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"][:2] == ["conveyor",
                                                                                                    "drain"]
        eventually(lambda: (api.get_connector(kube_namespace, name).get("status") or {}).get("observedGeneration")
                   == 1, message="observedGeneration 1")
        progressing = api.condition(kube_namespace, name, "Progressing")
        assert progressing["status"] == "True"
        # without a driver the status reads say so
        eventually(lambda: (api.condition(kube_namespace, name, "Ready") or {}).get("reason") == "DriverUnreachable",
                   message="Ready=False DriverUnreachable")

        kube_api.kubectl("scale", f"connector/{name}", "-n", kube_namespace, "--replicas=3")
        assert api.get_connector(kube_namespace, name)["spec"]["tasksMax"] == 3
        eventually(lambda: (api.get_connector(kube_namespace, name).get("status") or {}).get("tasksMax") == 3,
                   message="status.tasksMax 3")
        eventually(lambda: yaml.safe_load(api.core.read_namespaced_config_map(
            f"{name}-connector", kube_namespace).data["connector.yaml"])["spec"]["tasksMax"] == 3,
            message="ConfigMap tasksMax 3")

        def executor_instances() -> str:
            args = api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace).spec.template.spec \
                .containers[0].args
            return dict(a.split("=", 1) for a in args if a.startswith("spark."))["spark.executor.instances"]

        # the driver raises it at start, and asks running for more executors (issue 34): the pod
        # template keeps spec.spark.executor.instances; the disruption budget follows the tasks
        eventually(lambda: api.policy.read_namespaced_pod_disruption_budget(f"{name}-pods", kube_namespace)
                   .spec.min_available == 3, message="the budget of an executor for each of the 3 tasks")
        assert executor_instances() == "1"
        listed = kube_api.kubectl("get", "connectors", "-n", kube_namespace).stdout
        assert "CLASS" in listed and "noop-sink" in listed and "READY" in listed
        kube_api.kubectl("get", "cnr", "-n", kube_namespace)


def test_network_policies_are_applied_as_rendered_and_deleted_when_disabled(kube_api, kube_namespace, chart,
                                                                            operator, api):
    """The API server takes the connector's NetworkPolicies as the operator applies them with the
    chart's RBAC and settings (the test node's bridge CNI does not enforce them: what they admit
    is tests/operator/test_network_policy.py); networkPolicy.enabled=false deletes them."""
    from conveyor_operator.reconcile import network_policy
    from conveyor_operator.settings import OperatorSettings

    from conveyor.manifest import ConnectorManifest

    name = _name("netpol")
    body = connector(name, kube_namespace, "noop-sink", "kafka:9092", {"topics": "orders"}, tasksMax=1)

    def policies() -> dict[str, dict]:
        found = json.loads(kube_api.kubectl("get", "networkpolicies", "-n", kube_namespace, "-l",
                                            f"conveyor.dev/connector={name}", "-o", "json").stdout)["items"]
        return {p["metadata"]["name"]: p for p in found}

    with operator():
        kube_api.kubectl("apply", "-f", "-", input=yaml.safe_dump(body))
        found = eventually(lambda: policies() if len(policies()) == 2 else None, message="two NetworkPolicies")
    uid = api.get_connector(kube_namespace, name)["metadata"]["uid"]
    settings = OperatorSettings.from_env({k: v for k, v in chart["operator_env"].items()
                                          if k.startswith("CONVEYOR_OPERATOR_")})
    manifest = ConnectorManifest.from_dict({**body, "metadata": {"name": name, "namespace": kube_namespace}})
    wanted = {p["metadata"]["name"]: p for p in network_policy.network_policies(manifest, uid, settings)}
    assert set(found) == {f"{name}-driver", f"{name}-executor"} == set(wanted)
    for policy_name, policy in found.items():
        assert policy["spec"] == wanted[policy_name]["spec"], "stored as rendered (nothing dropped or defaulted)"
        assert policy["metadata"]["ownerReferences"][0]["uid"] == uid
    operator_peer = found[f"{name}-driver"]["spec"]["ingress"][0]["from"][1]
    assert operator_peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": chart["namespace"]}

    with operator(env={"CONVEYOR_OPERATOR_NETWORK_POLICY": "false"}):  # resumes the Connector: deletes them
        eventually(lambda: not policies(), message="NetworkPolicies deleted")


@pytest.mark.parametrize(("spec", "field"), [
    ({"kafka": {"bootstrapServers": "k:9092"}}, "spec.class"),
    ({"class": "noop-sink", "kafka": {"bootstrapServers": "k:9092"}, "tasksMax": 0}, "spec.tasksMax"),
    ({"class": "noop-sink", "kafka": {"bootstrapServers": "k:9092"}, "state": "sleeping"}, "spec.state"),
    ({"class": "noop-sink", "kafka": {"bootstrapServers": "k:9092"},
      "configFrom": [{"secretRef": {"name": "a"}, "configMapRef": {"name": "b"}}]}, "spec.configFrom[0]"),
    # issue 28, item 1: a Secret key is a Kubernetes key, never a path
    ({"class": "noop-sink", "kafka": {"bootstrapServers": "k:9092", "authentication": {
        "type": "plain", "username": "u", "passwordSecret": {"name": "s", "key": "../../../etc/passwd"}}}},
     "spec.kafka.authentication.passwordSecret.key"),
    ({"class": "noop-sink", "kafka": {"bootstrapServers": "k:9092", "tls": {"trustedCertificate": {
        "name": "s", "key": "/var/run/secrets/kubernetes.io/serviceaccount/token"}}}},
     "spec.kafka.tls.trustedCertificate.key"),
    ({"class": "noop-sink", "kafka": {"bootstrapServers": "k:9092", "tls": {
        "certificate": {"name": "s", "key": "tls.crt"}, "key": {"name": "s", "key": ".."}}}}, "spec.kafka.tls.key.key"),
    # issue 28, item 2: what no setting allows is refused at admission, the key named
    ({"class": "noop-sink", "kafka": {"bootstrapServers": "k:9092"},
      "spark": {"sparkConf": {"spark.executor.pyspark.memory": "1g", "spark.master": "local"}}},
     "spec.spark.sparkConf: Forbidden: key spark.master is set by the operator"),
    ({"class": "noop-sink", "kafka": {"bootstrapServers": "k:9092"},
      "spark": {"sparkConf": {"spark.kubernetes.executor.label.conveyor.dev/connector": "other"}}},
     "key spark.kubernetes.executor.label.conveyor.dev/connector is set by the operator"),
])
def test_invalid_manifests_are_rejected_at_admission_naming_the_field(kube_api, chart, kube_namespace, spec, field):
    body = {"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
            "metadata": {"name": "bad", "namespace": kube_namespace}, "spec": spec}
    result = kube_api.kubectl("apply", "-f", "-", input=yaml.safe_dump(body), check=False)
    assert result.returncode != 0
    assert field in result.stderr, result.stderr


def test_bad_config_and_missing_secret_become_conditions_and_events(kube_api, kube_namespace, operator, api):
    bad, secretless = _name("badcfg"), _name("nosecret")
    with operator():
        api.create_connector(connector(bad, kube_namespace, "noop-sink", "k:9092",
                                       {"topics": "t", "errors.tolerance": "sometimes"}))
        api.create_connector(connector(secretless, kube_namespace, "noop-sink", "k:9092",
                                       {"topics": "t", "password": "${secret:creds:password}"},
                                       configFrom=[{"secretRef": {"name": "creds"}}]))
        degraded = eventually(lambda: api.condition(kube_namespace, bad, "Degraded"), message="Degraded")
        assert degraded["status"] == "True" and degraded["reason"] == "InvalidConfig"
        assert "spec.config.errors.tolerance" in degraded["message"]
        eventually(lambda: api.events(kube_namespace, bad, "InvalidConfig"), message="InvalidConfig Event")
        missing = eventually(lambda: api.condition(kube_namespace, secretless, "Degraded"), message="Degraded")
        assert missing["reason"] == "MissingReference"
        assert "spec.configFrom[0].secretRef: Secret 'creds' not found" in missing["message"]
        eventually(lambda: api.events(kube_namespace, secretless, "MissingReference"), message="Event")
        with pytest.raises(client.ApiException):
            api.apps.read_namespaced_deployment(f"{bad}-driver", kube_namespace)
        # fixing the input heals the connector without a restart of anything
        api.core.create_namespaced_secret(kube_namespace, client.V1Secret(
            metadata=client.V1ObjectMeta(name="creds"), string_data={"password": "s3cret"}))
        eventually(lambda: (api.condition(kube_namespace, secretless, "Degraded") or {}).get("status") == "False",
                   timeout_s=60, message="Degraded=False once the Secret exists")
        dep = api.apps.read_namespaced_deployment(f"{secretless}-driver", kube_namespace)
        mounts = {m.mount_path for m in dep.spec.template.spec.containers[0].volume_mounts}
        assert "/etc/conveyor/secrets/creds" in mounts
        for event in api.events(kube_namespace, secretless):
            assert "s3cret" not in (event.message or "")
        # refused before anything was applied: deleting it runs no cleanup Job, the finalizer goes at once
        api.delete_connector(kube_namespace, bad)
        eventually(lambda: api.get_connector(kube_namespace, bad) is None, timeout_s=30,
                   message="the never-applied Connector gone without a cleanup Job")
        assert api.events(kube_namespace, bad, "NothingToCleanUp")
        with pytest.raises(client.ApiException):
            api.batch.read_namespaced_job(f"{bad}-cleanup", kube_namespace)


def test_spark_conf_is_an_allow_list_that_the_operators_setting_widens(kube_api, chart, kube_namespace, operator, api):
    """The operator's own check, behind the chart's admission policy (which would refuse both
    Connectors: it only warns while they are created; tests/kube/test_admission_policy.py)."""
    refused, widened = _name("sparkjar"), _name("sparkpkg")
    with operator(env={"CONVEYOR_OPERATOR_ALLOWED_SPARK_CONF": "spark.jars.packages"}):
        with chart_policy_only_warns(kube_api, chart, kube_namespace):
            api.create_connector(connector(refused, kube_namespace, "noop-sink", "k:9092", {"topics": "t"},
                                           spark={"sparkConf": {"spark.jars": "https://example.invalid/evil.jar",
                                                                "spark.executor.pyspark.memory": "512m"}}))
            api.create_connector(connector(widened, kube_namespace, "noop-sink", "k:9092", {"topics": "t"},
                                           spark={"sparkConf": {"spark.jars.packages": "org.example:lib:1.0"}}))
        degraded = eventually(lambda: api.condition(kube_namespace, refused, "Degraded"), message="Degraded")
        assert degraded["status"] == "True" and degraded["reason"] == "InvalidSpec", degraded
        assert "spec.spark.sparkConf.spark.jars: not a property a connector may set" in degraded["message"]
        assert "pyspark.memory" not in degraded["message"], "allowed keys are not named"
        event = eventually(lambda: api.events(kube_namespace, refused, "InvalidSpec"), message="InvalidSpec Event")
        assert "spec.spark.sparkConf.spark.jars" in event[0].message
        with pytest.raises(client.ApiException):
            api.apps.read_namespaced_deployment(f"{refused}-driver", kube_namespace)
        deployment = eventually(lambda: api.apps.read_namespaced_deployment(f"{widened}-driver", kube_namespace),
                                message="the Deployment of a connector using a key the platform allows")
        env = {e.name: e.value for e in deployment.spec.template.spec.containers[0].env}
        assert env["CONVEYOR_ALLOWED_SPARK_CONF"] == "spark.jars.packages", "the driver accepts what the operator did"


# --- drivers run locally --------------------------------------------------------------------------

class LocalDriverProcess:
    """``conveyor run --stay-after-stop`` of the manifest the operator rendered, as the driver pod
    runs it: for what only the process shows (a failed start served instead of exited)."""

    def __init__(self, api: Api, namespace: str, name: str, tmp: Path, port: int) -> None:
        manifest = api.core.read_namespaced_config_map(f"{name}-connector", namespace).data["connector.yaml"]
        path = tmp / f"{name}.yaml"
        path.write_text(manifest)
        tokens = tmp / f"{name}-control"
        tokens.mkdir(exist_ok=True)
        secret = api.core.read_namespaced_secret(f"{name}-control", namespace)
        for key, value in (secret.data or {}).items():
            (tokens / key).write_bytes(base64.b64decode(value))
        env = {**os.environ, "POD_NAME": f"{name}-driver-local", "CONVEYOR_CONTROL_TOKEN_DIR": str(tokens)}
        self.log = open(tmp / f"{name}.log", "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "conveyor.cli", "run", str(path), "--control-port", str(port),
             "--no-progress", "--stay-after-stop"], stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(90)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def _audit_objects(url: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [r[0] for r in conn.execute(
            "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal AND tgname LIKE 'conveyor_audit_%' "
            "UNION ALL SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'conveyor_audit' AND c.relkind = 'r' ORDER BY 1")]


def _audit_connector(name, namespace, bootstrap, url, **extra):
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders (id bigint PRIMARY KEY, item text)")
    return connector(name, namespace, "postgres-audit-source", bootstrap, {
        "connection.url": url, "tables": "public.orders", "topic.prefix": f"{name}.",
        "value.converter": "json", "value.converter.schemas.enable": "false",
        "key.converter": "json", "key.converter.schemas.enable": "false", "poll.interval.ms": "200",
    }, **extra)


def test_delete_holds_the_finalizer_until_the_driver_cleaned_up(kube_api, kube_namespace, operator, api,
                                                                 kafka_bootstrap, pg_database, tmp_path, spark):
    name = _name("audit")
    port = free_port()
    with operator(port):
        api.create_connector(_audit_connector(name, kube_namespace, kafka_bootstrap, pg_database))
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace), message="Deployment")
        # as the Deployment runs it: a driver stopped through the API stays up (no restart by the kubelet;
        # that the process does is test_spark_conf's)
        driver = LocalDriver(spark, api, kube_namespace, name, tmp_path, port)
        try:
            driver.wait_running()
            eventually(lambda: len(_audit_objects(pg_database)) >= 2, message="audit trigger and table")
            eventually(lambda: (api.condition(kube_namespace, name, "Ready") or {}).get("status") == "True",
                       message="Ready=True from the driver's status")
            api.delete_connector(kube_namespace, name)
            held = api.get_connector(kube_namespace, name)
            assert held is not None and "conveyor.dev/finalizer" in held["metadata"]["finalizers"]
            eventually(lambda: api.get_connector(kube_namespace, name) is None, timeout_s=120,
                       message="Connector gone once the driver cleaned up")
            assert _audit_objects(pg_database) == [], "the audit trigger and table are dropped"
            assert driver.status()["connector"]["state"] == "STOPPED"
            cleaned = api.events(kube_namespace, name, "CleanedUp")
            assert cleaned and "driver" in cleaned[0].message
        finally:
            driver.stop()


def _complete_job(api: Api, namespace: str, name: str) -> None:
    """Play the Job controller: mark the Job succeeded, as it would after its pod exited 0."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions = [{"type": t, "status": "True", "lastProbeTime": now, "lastTransitionTime": now}
                  for t in ("SuccessCriteriaMet", "Complete")]
    api.batch.patch_namespaced_job_status(name, namespace, {"status": {
        "startTime": now, "completionTime": now, "succeeded": 1, "conditions": conditions}})


def test_cleanup_job_when_no_driver_runs_even_with_the_operator_down_at_delete(
        kube_api, kube_namespace, operator, api, kafka_bootstrap, pg_database, tmp_path, spark):
    name = _name("audit")
    port = free_port()
    with operator(port):
        api.create_connector(_audit_connector(name, kube_namespace, kafka_bootstrap, pg_database,
                                              deletionPolicy={"cleanup": True, "offsets": "delete"}))
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace), message="Deployment")
    driver = LocalDriver(spark, api, kube_namespace, name, tmp_path, port)
    try:
        driver.wait_running()
        eventually(lambda: len(_audit_objects(pg_database)) >= 2, message="audit trigger and table")
    finally:
        driver.stop()                       # a plain stop: what the connector provisioned stays
    assert len(_audit_objects(pg_database)) >= 2

    api.delete_connector(kube_namespace, name)        # the operator is down: the finalizer waits
    time.sleep(2)
    assert api.get_connector(kube_namespace, name) is not None

    with operator(port):
        job = eventually(lambda: api.batch.read_namespaced_job(f"{name}-cleanup", kube_namespace),
                         message="cleanup Job")
        container = job.spec.template.spec.containers[0]
        assert container.command == ["conveyor"] and container.args[0] == "cleanup"
        assert "--delete-offsets" in container.args
        assert job.spec.backoff_limit == 0
        assert api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace).spec.replicas == 0
        # Play the kubelet: run the Job's command on the manifest its pod mounts.
        manifest = tmp_path / "mounted.yaml"
        manifest.write_text(api.core.read_namespaced_config_map(f"{name}-connector", kube_namespace)
                            .data["connector.yaml"])
        args = [str(manifest) if a.endswith("/connector.yaml") else a for a in container.args]
        ran = subprocess.run([sys.executable, "-m", "conveyor.cli", *args], capture_output=True, text=True,
                             timeout=300)
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert _audit_objects(pg_database) == []
        time.sleep(1)
        assert api.get_connector(kube_namespace, name) is not None, "held until the Job reports success"
        _complete_job(api, kube_namespace, f"{name}-cleanup")
        eventually(lambda: api.get_connector(kube_namespace, name) is None, timeout_s=60,
                   message="Connector gone after the Job succeeded")
        assert api.events(kube_namespace, name, "CleanupJobStarted")


def test_cleanup_job_waits_until_no_driver_pod_is_terminating(kube_api, kube_namespace, operator, api):
    """A Deployment's status.replicas leaves terminating pods out; the cleanup Job must not
    run beside a driver pod that is still stopping (issue 11 §3)."""
    name = _name("slow")
    pod_name = f"{name}-driver-5c7b-q8w2z"
    with operator():
        api.create_connector(connector(name, kube_namespace, "noop-sink", "k:9092", {"topics": "t"}))
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace), message="Deployment")
        # bound to a node that has no kubelet: a graceful delete leaves it Terminating
        api.core.create_namespaced_pod(kube_namespace, client.V1Pod(
            metadata=client.V1ObjectMeta(name=pod_name, labels={
                "conveyor.dev/connector": name, "conveyor.dev/component": "driver"}),
            spec=client.V1PodSpec(node_name="node-a", containers=[client.V1Container(name="driver",
                                                                                     image="conveyor")])))
        api.core.delete_namespaced_pod(pod_name, kube_namespace, grace_period_seconds=300)
        assert api.core.read_namespaced_pod(pod_name, kube_namespace).metadata.deletion_timestamp
        api.delete_connector(kube_namespace, name)
        time.sleep(4)  # several of the operator's polls (every second here: CONVEYOR_OPERATOR_WAIT_POLL_SECONDS)
        with pytest.raises(client.ApiException) as missing:
            api.batch.read_namespaced_job(f"{name}-cleanup", kube_namespace)
        assert missing.value.status == 404, "the Job started beside a terminating driver pod"
        api.core.delete_namespaced_pod(pod_name, kube_namespace, grace_period_seconds=0)
        eventually(lambda: api.batch.read_namespaced_job(f"{name}-cleanup", kube_namespace), timeout_s=30,
                   message="the cleanup Job once the driver pod is gone")


def test_skip_cleanup_annotation_gives_up_explicitly(kube_api, kube_namespace, operator, api):
    name = _name("skip")
    with operator():
        api.create_connector(connector(name, kube_namespace, "noop-sink", "k:9092", {"topics": "t"},
                                       annotations={"conveyor.dev/skip-cleanup": "true"}))
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace), message="Deployment")
        api.delete_connector(kube_namespace, name)
        eventually(lambda: api.get_connector(kube_namespace, name) is None, timeout_s=30, message="Connector gone")
        with pytest.raises(client.ApiException) as missing:
            api.batch.read_namespaced_job(f"{name}-cleanup", kube_namespace)
        assert missing.value.status == 404
        assert api.events(kube_namespace, name, "CleanupSkipped")


def test_a_connector_with_nothing_to_clean_up_carries_no_finalizer_until_its_policy_asks_for_one(
        kube_api, kube_namespace, operator, api):
    """``deletionPolicy: {cleanup: false}`` with the offsets retained: deleting the Connector has
    nothing to do outside Kubernetes, so it carries no finalizer (no operator needed to delete it,
    no two extra writes per delete). Asking for a cleanup adds it, asking for none removes it."""
    name = _name("nofin")

    def finalizers() -> list[str]:
        return (api.get_connector(kube_namespace, name) or {}).get("metadata", {}).get("finalizers") or []

    with operator():
        api.create_connector(connector(name, kube_namespace, "noop-sink", "k:9092", {"topics": "t"},
                                       deletionPolicy={"cleanup": False}))
        eventually(lambda: (api.get_connector(kube_namespace, name) or {}).get("status", {}).get("observedGeneration"),
                   message="reconciled")
        assert finalizers() == []
        _patch_connector(api, kube_namespace, name, {"spec": {"deletionPolicy": {"cleanup": True}}})
        eventually(lambda: "conveyor.dev/finalizer" in finalizers(), message="the finalizer, once a cleanup is asked")
        _patch_connector(api, kube_namespace, name, {"spec": {"deletionPolicy": {"cleanup": False, "offsets": "delete"}}})
        time.sleep(2)
        assert "conveyor.dev/finalizer" in finalizers(), "deleting the offsets needs the finalizer too"
        _patch_connector(api, kube_namespace, name, {"spec": {"deletionPolicy": {"cleanup": False, "offsets": "retain"}}})
        eventually(lambda: finalizers() == [], message="no finalizer once there is nothing to clean up")
    api.delete_connector(kube_namespace, name)  # the operator is down: nothing waits for it
    eventually(lambda: api.get_connector(kube_namespace, name) is None, timeout_s=10, message="Connector gone")


def _deleted_with_a_cleanup_job(api: Api, namespace: str, name: str) -> client.V1Job:
    """A noop-sink Connector applied, then deleted with no driver answering: its cleanup Job."""
    api.create_connector(connector(name, namespace, "noop-sink", "k:9092", {"topics": "t"}))
    eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", namespace), message="Deployment")
    api.delete_connector(namespace, name)
    return eventually(lambda: api.batch.read_namespaced_job(f"{name}-cleanup", namespace), message="cleanup Job")


def test_failed_cleanup_keeps_the_finalizer_and_says_why(kube_api, kube_namespace, operator, api):
    name = _name("fails")
    with operator():
        job = _deleted_with_a_cleanup_job(api, kube_namespace, name)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        api.batch.patch_namespaced_job_status(job.metadata.name, kube_namespace, {"status": {
            "startTime": now, "failed": 1, "conditions": [
                {"type": t, "status": "True", "reason": "BackoffLimitExceeded",
                 "message": "Job has reached the specified backoff limit", "lastProbeTime": now,
                 "lastTransitionTime": now} for t in ("FailureTarget", "Failed")]}})
        failed = eventually(lambda: api.condition(kube_namespace, name, "CleanupFailed"), message="CleanupFailed")
        assert failed["status"] == "True" and "backoff limit" in failed["message"]
        eventually(lambda: api.events(kube_namespace, name, "CleanupFailed"), message="the CleanupFailed Event")
        assert api.get_connector(kube_namespace, name) is not None
        api.custom.patch_namespaced_custom_object("conveyor.dev", "v1alpha1", kube_namespace, "connectors", name,
                                                  {"metadata": {"annotations": {"conveyor.dev/skip-cleanup": "true"}}})
        eventually(lambda: api.get_connector(kube_namespace, name) is None, timeout_s=60,
                   message="gone after skip-cleanup")


# --- one Connector after another of the same name (issue 28, item 7) -----------------------------

def _patch_connector(api: Api, namespace: str, name: str, patch: dict) -> None:
    api.custom.patch_namespaced_custom_object("conveyor.dev", "v1alpha1", namespace, "connectors", name, patch)


def _cleanup_pod(api: Api, namespace: str, name: str) -> str:
    """A pod of the connector's cleanup Job, bound to a node that has no kubelet: once deleted
    gracefully it stays Terminating until the test (playing the kubelet) removes it."""
    pod = f"{name}-cleanup-x7k2p"
    api.core.create_namespaced_pod(namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name=pod, labels={"conveyor.dev/connector": name,
                                                       "conveyor.dev/component": "cleanup"}),
        spec=client.V1PodSpec(node_name="node-a", containers=[client.V1Container(name="cleanup", image="conveyor")])))
    return pod


def test_a_connector_whose_spec_became_invalid_is_cleaned_up_as_last_applied(kube_api, kube_namespace, operator,
                                                                             api):
    name = _name("lastgood")
    with operator():
        api.create_connector(connector(name, kube_namespace, "noop-sink", "k:9092", {"topics": "t"}))
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace), message="Deployment")
        # admitted by the CRD, refused by the model: the connector ran, its current spec is invalid
        _patch_connector(api, kube_namespace, name, {"spec": {"config": {"connector.class": "postgres-sink"}}})
        degraded = eventually(lambda: (api.condition(kube_namespace, name, "Degraded") or {}).get("reason")
                              == "InvalidSpec", message="Degraded InvalidSpec")
        assert degraded
        api.delete_connector(kube_namespace, name)
        job = eventually(lambda: api.batch.read_namespaced_job(f"{name}-cleanup", kube_namespace), timeout_s=30,
                         message="a cleanup Job for the generation that ran")
        mounted = {v.config_map.name for v in job.spec.template.spec.volumes if v.config_map}
        assert f"{name}-connector" in mounted
        manifest = yaml.safe_load(api.core.read_namespaced_config_map(f"{name}-connector", kube_namespace)
                                  .data["connector.yaml"])
        assert "connector.class" not in manifest["spec"]["config"], "the Job cleans up with the last applied spec"
        event = api.events(kube_namespace, name, "CleanupOfLastApplied")
        assert event and "generation 1" in event[0].message
        assert not api.events(kube_namespace, name, "NothingToCleanUp")
        _complete_job(api, kube_namespace, f"{name}-cleanup")
        eventually(lambda: api.get_connector(kube_namespace, name) is None, timeout_s=60,
                   message="Connector gone after the Job succeeded")


def test_skip_cleanup_ends_the_cleanup_job_before_the_finalizer_goes(kube_api, kube_namespace, operator, api):
    name = _name("skipjob")
    with operator():
        _deleted_with_a_cleanup_job(api, kube_namespace, name)
        pod = _cleanup_pod(api, kube_namespace, name)
        api.core.delete_namespaced_pod(pod, kube_namespace, grace_period_seconds=300)  # as the Job's deletion would
        _patch_connector(api, kube_namespace, name, {"metadata": {"annotations": {"conveyor.dev/skip-cleanup": "true"}}})

        def job_gone():
            try:
                api.batch.read_namespaced_job(f"{name}-cleanup", kube_namespace)
            except client.ApiException as exc:
                return exc.status == 404
            return False
        eventually(job_gone, timeout_s=30, message="the cleanup Job deleted")
        time.sleep(3)  # several of the operator's polls (every second here: CONVEYOR_OPERATOR_WAIT_POLL_SECONDS)
        assert api.get_connector(kube_namespace, name) is not None, "the finalizer went while a cleanup pod ran"
        api.core.delete_namespaced_pod(pod, kube_namespace, grace_period_seconds=0)
        eventually(lambda: api.get_connector(kube_namespace, name) is None, timeout_s=30,
                   message="Connector gone once its cleanup pod is")
        assert api.events(kube_namespace, name, "CleanupSkipped")


def test_a_skip_cleanup_deletion_that_began_no_cleanup_still_waits_for_a_cleanup_pod_of_its_name(
        kube_api, kube_namespace, operator, api):
    """A skip-cleanup Connector that began no cleanup (no ``Deleting`` condition) is let go without
    a request of the operator's own but its Event (issue 33): what tells it a cleanup pod of its
    name still runs is the operator's pod index, and that pod holds the finalizer as before."""
    name = _name("skippod")
    with operator():
        api.create_connector(connector(name, kube_namespace, "noop-sink", "k:9092", {"topics": "t"},
                                       annotations={"conveyor.dev/skip-cleanup": "true"}))
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace), message="Deployment")
        pod = _cleanup_pod(api, kube_namespace, name)
        time.sleep(2)  # the operator's pod watch delivers it to the index
        api.delete_connector(kube_namespace, name)
        time.sleep(3)  # several of the operator's polls (every second here: CONVEYOR_OPERATOR_WAIT_POLL_SECONDS)
        held = api.get_connector(kube_namespace, name)
        assert held is not None, "the finalizer went while a cleanup pod of its name ran"
        assert not any(c.get("type") == "Deleting" for c in (held.get("status") or {}).get("conditions") or [])
        api.core.delete_namespaced_pod(pod, kube_namespace, grace_period_seconds=0)
        eventually(lambda: api.get_connector(kube_namespace, name) is None, timeout_s=30,
                   message="Connector gone once the cleanup pod of its name is")
        eventually(lambda: api.events(kube_namespace, name, "CleanupSkipped"), message="the CleanupSkipped Event")


def test_a_connector_recreated_after_skip_cleanup_keeps_what_it_provisions(kube_api, kube_namespace, operator, api,
                                                                           kafka_bootstrap, pg_database, tmp_path, spark):
    """skip-cleanup, then at once a new Connector of the same name: the earlier one's cleanup
    Job must not run on (and drop the new one's triggers, tombstone its offsets), and the new
    one must not take over the earlier one's objects while they await the garbage collector."""
    name = _name("again")
    port = free_port()
    policy = {"cleanup": True, "offsets": "delete"}
    with operator(port):
        api.create_connector(_audit_connector(name, kube_namespace, kafka_bootstrap, pg_database,
                                              deletionPolicy=policy))
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace), message="Deployment")
        first = api.get_connector(kube_namespace, name)["metadata"]["uid"]
        api.delete_connector(kube_namespace, name)  # no driver answers: a cleanup Job
        eventually(lambda: api.batch.read_namespaced_job(f"{name}-cleanup", kube_namespace), message="cleanup Job")
        _patch_connector(api, kube_namespace, name, {"metadata": {"annotations": {"conveyor.dev/skip-cleanup": "true"}}})
        eventually(lambda: api.get_connector(kube_namespace, name) is None, timeout_s=30, message="first one gone")

        api.create_connector(_audit_connector(name, kube_namespace, kafka_bootstrap, pg_database,
                                              deletionPolicy=policy))
        second = api.get_connector(kube_namespace, name)["metadata"]["uid"]
        waiting = eventually(lambda: (api.condition(kube_namespace, name, "Progressing") or {}).get("reason")
                             == "WaitingForPredecessor" and api.condition(kube_namespace, name, "Progressing"),
                             timeout_s=30, message="the second one waits for the first one's objects")
        assert f"Deployment {name}-driver" in waiting["message"]
        deployment = api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace)
        assert [ref.uid for ref in deployment.metadata.owner_references] == [first], "taken over"
        # play the garbage collector: the first Connector's dependents go
        for read, remove in ((api.apps.read_namespaced_deployment, api.apps.delete_namespaced_deployment),
                             (api.core.read_namespaced_secret, api.core.delete_namespaced_secret),
                             (api.core.read_namespaced_config_map, api.core.delete_namespaced_config_map),
                             (api.core.read_namespaced_service, api.core.delete_namespaced_service)):
            for suffix in ("driver", "control", "connector"):
                try:
                    obj = read(f"{name}-{suffix}", kube_namespace)
                except client.ApiException:
                    continue
                if [ref.uid for ref in obj.metadata.owner_references or []] == [first]:
                    remove(f"{name}-{suffix}", kube_namespace)
        eventually(lambda: [r.uid for r in api.apps.read_namespaced_deployment(
            f"{name}-driver", kube_namespace).metadata.owner_references] == [second], timeout_s=30,
            message="the second Connector's own Deployment")
        driver = LocalDriver(spark, api, kube_namespace, name, tmp_path, port)
        try:
            driver.wait_running()
            eventually(lambda: len(_audit_objects(pg_database)) >= 2, message="the second one's trigger and table")
        finally:
            driver.stop()
        # play the kubelet: a cleanup Job still there would now run its command
        try:
            job = api.batch.read_namespaced_job(f"{name}-cleanup", kube_namespace)
        except client.ApiException:
            job = None
        if job is not None:
            manifest = tmp_path / "mounted.yaml"
            manifest.write_text(api.core.read_namespaced_config_map(f"{name}-connector", kube_namespace)
                                .data["connector.yaml"])
            container = job.spec.template.spec.containers[0]
            args = [str(manifest) if a.endswith("/connector.yaml") else a for a in container.args]
            subprocess.run([sys.executable, "-m", "conveyor.cli", *args], capture_output=True, timeout=300)
        assert len(_audit_objects(pg_database)) >= 2, "the second Connector's triggers were dropped"
        assert job is None, "the first Connector's cleanup Job outlived its finalizer"


def test_eviction_of_a_driver_pod_becomes_a_closing_commit(kube_api, kube_namespace, operator, api,
                                                           kafka_bootstrap, tmp_path, spark):
    name, topic = _name("evict"), _name("evict-topic")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    produce(kafka_bootstrap, topic, [(f"k{i}".encode(), f"v{i}".encode()) for i in range(300)])
    port = free_port()
    pod_name = current_pod()  # where the in-process driver's tasks say they run (POD_NAME, else the host name)
    with operator(port):
        api.create_connector(connector(name, kube_namespace, "noop-sink", kafka_bootstrap, {
            "topics": topic, "offset.flush.interval.ms": "3600000",
            "key.converter": "string", "value.converter": "string"}, shutdown={"gracePeriodSeconds": 30}))
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace), message="Deployment")
        driver = LocalDriver(spark, api, kube_namespace, name, tmp_path, port)
        try:
            driver.wait_running()
            eventually(lambda: sum(t.get("records_put", 0) for t in driver.status()["tasks"]) >= 300,
                       message="300 records put")
            assert sum(committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 3).values()) == 0, \
                "nothing committed yet: the flush interval is an hour"
            # the pod the Deployment would have made, bound to a node so that deletion is graceful
            api.core.create_namespaced_pod(kube_namespace, client.V1Pod(
                metadata=client.V1ObjectMeta(name=pod_name, labels={
                    "conveyor.dev/connector": name, "conveyor.dev/component": "driver",
                    "app.kubernetes.io/instance": name}),
                spec=client.V1PodSpec(node_name="node-a", containers=[client.V1Container(name="driver",
                                                                                         image="conveyor")])))
            api.core.create_namespaced_pod_eviction(pod_name, kube_namespace, client.V1Eviction(
                metadata=client.V1ObjectMeta(name=pod_name, namespace=kube_namespace)))
            translated = eventually(lambda: api.events(kube_namespace, name, "EvictionTranslated"), timeout_s=60,
                                    message="EvictionTranslated Event")
            assert pod_name in translated[0].message
            committed = committed_offsets(kafka_bootstrap, f"connect-{name}", topic, 3)
            assert sum(committed.values()) == 300, committed
            eviction = api.get_connector(kube_namespace, name)["status"]["evictions"][-1]
            assert eviction["pod"] == pod_name and eviction["trigger"] == "DisruptionTarget"
            assert eviction["complete"] is True
            assert sum(c["offset"] for c in eviction["committed"]) == 300

            # the restart-task annotation, and Strimzi's, is delivered and removed
            for annotation in ("conveyor.dev/restart-task", "strimzi.io/restart-task"):
                attempt = eventually(lambda: driver.status()["tasks"][0]["state"] == "RUNNING"
                                     and driver.status()["tasks"][0]["attempt"], message="task 0 running again")
                api.custom.patch_namespaced_custom_object(
                    "conveyor.dev", "v1alpha1", kube_namespace, "connectors", name,
                    {"metadata": {"annotations": {annotation: "0"}}})
                eventually(lambda a=annotation: a not in
                           (api.get_connector(kube_namespace, name)["metadata"].get("annotations") or {}),
                           message=f"{annotation} removed")
                eventually(lambda a=attempt: driver.status()["tasks"][0]["attempt"] > a,
                           message=f"task 0 restarted by {annotation}")
            attempt = eventually(lambda: driver.status()["tasks"][0]["state"] == "RUNNING"
                                 and driver.status()["tasks"][0]["attempt"], message="task 0 running again")
            api.custom.patch_namespaced_custom_object(  # Strimzi's connector restart
                "conveyor.dev", "v1alpha1", kube_namespace, "connectors", name,
                {"metadata": {"annotations": {"strimzi.io/restart": "true"}}})
            eventually(lambda: api.events(kube_namespace, name, "Restarted"), message="the Restarted Event")
            eventually(lambda: "strimzi.io/restart" not in
                       (api.get_connector(kube_namespace, name)["metadata"].get("annotations") or {}),
                       message="strimzi.io/restart removed")
            eventually(lambda: driver.status()["tasks"][0]["attempt"] > attempt, message="task 0 restarted")

            # config and state changes reach the running driver through its control API
            api.custom.patch_namespaced_custom_object(
                "conveyor.dev", "v1alpha1", kube_namespace, "connectors", name,
                {"spec": {"config": {"offset.flush.interval.ms": "500"}}})
            eventually(lambda: api.events(kube_namespace, name, "Reconfigured"), message="Reconfigured Event")
            eventually(lambda: driver.status()["tasks"] and driver.status()["tasks"][0]["state"] == "RUNNING",
                       message="running with the new config")
            assert not driver.driver.stopped.is_set(), "reconfigured live, not restarted"
            api.custom.patch_namespaced_custom_object(
                "conveyor.dev", "v1alpha1", kube_namespace, "connectors", name, {"spec": {"state": "paused"}})
            eventually(lambda: driver.status()["connector"]["state"] == "PAUSED", message="driver PAUSED")
            eventually(lambda: (api.condition(kube_namespace, name, "Ready") or {}).get("reason") == "Paused",
                       message="Ready reason Paused")
        finally:
            driver.stop()


@pytest.mark.process_boundary("a conveyor run process that failed to start serves its status instead of exiting")
def test_a_connector_that_cannot_start_is_degraded_not_crash_looping(kube_api, kube_namespace, operator, api,
                                                                     tmp_path):
    """A class only the runtime image could have (the operator cannot check it): the driver,
    run as the Deployment runs it, stays up reporting FAILED instead of exiting."""
    name = _name("nostart")
    port = free_port()
    with operator(port):
        api.create_connector(connector(name, kube_namespace, "acme_connectors.missing:AuditSource", "k:9092", {}))
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace), message="Deployment")
        driver = LocalDriverProcess(api, kube_namespace, name, tmp_path, port)
        try:
            degraded = eventually(lambda: (api.condition(kube_namespace, name, "Degraded") or {}).get("reason")
                                  == "Failed" and api.condition(kube_namespace, name, "Degraded"),
                                  message="Degraded=True reason Failed")
            assert degraded["status"] == "True"
            status = api.get_connector(kube_namespace, name)["status"]["connector"]
            assert status["state"] == "FAILED" and "acme_connectors" in status["trace"]
            assert driver.process.poll() is None, "the driver stays up instead of crash-looping"

            api.delete_connector(kube_namespace, name)   # cleanup cannot run without the class
            failed = eventually(lambda: api.condition(kube_namespace, name, "CleanupFailed"), message="CleanupFailed")
            assert "acme_connectors" in failed["message"]
            api.custom.patch_namespaced_custom_object(
                "conveyor.dev", "v1alpha1", kube_namespace, "connectors", name,
                {"metadata": {"annotations": {"conveyor.dev/skip-cleanup": "true"}}})
            eventually(lambda: api.get_connector(kube_namespace, name) is None, timeout_s=60, message="gone")
        finally:
            driver.stop()


def test_auto_restart_restarts_a_failed_task_and_counts_it_in_the_status(kube_api, kube_namespace, operator, api,
                                                                          kafka_bootstrap, tmp_path, spark):
    """spec.autoRestart, as Strimzi's: the first restart of a FAILED task is immediate, counted in
    status.autoRestart with an Event; the task fails again (same records) and waits its back-off."""
    name, topic = _name("autorestart"), _name("autorestart-topic")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    produce(kafka_bootstrap, topic, [(f"k{i}".encode(), f"v{i}".encode()) for i in range(5)])
    port = free_port()
    with operator(port, env={"CONVEYOR_OPERATOR_STATUS_INTERVAL_SECONDS": "1"}):
        api.create_connector(connector(name, kube_namespace, "conveyor.testing.faults:FaultySinkConnector",
                                       kafka_bootstrap, {
            "topics": topic, "key.converter": "string", "value.converter": "string",
            "faulty.connector.class": "noop-sink", "faulty.journal.path": str(tmp_path / "journal.jsonl"),
            "faulty.fail.task": "0", "faulty.fail.after.records": "2"}, autoRestart={"maxRestarts": 3}))
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace), message="Deployment")
        driver = LocalDriver(spark, api, kube_namespace, name, tmp_path, port)
        try:
            restarted = eventually(lambda: (api.get_connector(kube_namespace, name).get("status") or {})
                                   .get("autoRestart"), timeout_s=120, message="status.autoRestart")
            assert restarted["count"] == 1 and restarted["connectorName"] == name
            eventually(lambda: api.events(kube_namespace, name, "AutoRestarted"), message="the AutoRestarted Event")
            eventually(lambda: driver.status()["tasks"][0]["attempt"] >= 1, message="task 0 run again")
            eventually(lambda: driver.status()["tasks"][0]["state"] == "FAILED", message="fails again")
            eventually(lambda: (api.condition(kube_namespace, name, "Degraded") or {}).get("reason") == "Failed",
                       message="Degraded again")
            time.sleep(5)  # the next restart is due 2 minutes after the first
            assert api.get_connector(kube_namespace, name)["status"]["autoRestart"] == restarted

            api.custom.patch_namespaced_custom_object(   # a manual restart resets the count
                "conveyor.dev", "v1alpha1", kube_namespace, "connectors", name,
                {"metadata": {"annotations": {"conveyor.dev/restart": "true"}}})
            eventually(lambda: api.events(kube_namespace, name, "Restarted"), message="manual restart")
            again = eventually(lambda: (api.get_connector(kube_namespace, name)["status"].get("autoRestart") or {})
                               .get("lastRestartTimestamp", restarted["lastRestartTimestamp"])
                               != restarted["lastRestartTimestamp"]
                               and api.get_connector(kube_namespace, name)["status"]["autoRestart"],
                               timeout_s=60, message="the count reset, then a new first restart")
            assert again["count"] == 1
        finally:
            driver.stop()


def test_offsets_are_listed_altered_and_reset_through_the_connector_as_strimzi_does(
    kube_api, kube_namespace, operator, api, kafka_bootstrap, tmp_path
, spark):
    """KIP-875 through the resource: conveyor.dev/connector-offsets=list writes the offsets to the
    spec.listOffsets ConfigMap; alter (from spec.alterOffsets) and reset wait for the connector to be
    stopped, then change the consumer group; every step is an Event and the annotation goes."""
    name, topic = _name("offsets"), _name("offsets-topic")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    produce(kafka_bootstrap, topic, [(f"k{i}".encode(), f"v{i}".encode()) for i in range(40)])
    group, port = f"connect-{name}", free_port()

    def annotate(value: str, key: str = "conveyor.dev/connector-offsets") -> None:
        api.custom.patch_namespaced_custom_object("conveyor.dev", "v1alpha1", kube_namespace, "connectors", name,
                                                  {"metadata": {"annotations": {key: value}}})
        eventually(lambda: key not in (api.get_connector(kube_namespace, name)["metadata"].get("annotations") or {}),
                   message=f"annotation {value} handled")

    with operator(port):
        api.create_connector(connector(name, kube_namespace, "noop-sink", kafka_bootstrap, {
            "topics": topic, "offset.flush.interval.ms": "300", "key.converter": "string",
            "value.converter": "string"}, listOffsets={"toConfigMap": {"name": f"{name}-listed"}},
            alterOffsets={"fromConfigMap": {"name": f"{name}-wanted"}}))
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace), message="Deployment")
        driver = LocalDriver(spark, api, kube_namespace, name, tmp_path, port)
        try:
            driver.wait_running()
            eventually(lambda: sum(committed_offsets(kafka_bootstrap, group, topic, 2).values()) == 40,
                       message="40 committed")
            annotate("list")
            listed = json.loads(api.core.read_namespaced_config_map(f"{name}-listed", kube_namespace)
                                .data["offsets.json"])
            assert sorted((o["partition"]["kafka_partition"], o["offset"]["kafka_offset"]) for o in listed["offsets"]) \
                == sorted(committed_offsets(kafka_bootstrap, group, topic, 2).items())
            eventually(lambda: api.events(kube_namespace, name, "OffsetsListed"), message="the OffsetsListed Event")
            # the operator's own ConfigMap: controlled by the Connector (deleted with it), marked as its offsets
            own = api.core.read_namespaced_config_map(f"{name}-listed", kube_namespace)
            reference = own.metadata.owner_references[0]
            assert (reference.kind, reference.name, reference.uid, reference.controller) == \
                ("Connector", name, api.get_connector(kube_namespace, name)["metadata"]["uid"], True)
            assert own.metadata.labels["conveyor.dev/component"] == "offsets"

            wanted = {"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0},
                                   "offset": {"kafka_offset": 1}}]}
            api.core.create_namespaced_config_map(kube_namespace, client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=f"{name}-wanted"), data={"offsets.json": json.dumps(wanted)}))
            api.custom.patch_namespaced_custom_object(   # alter while running: it waits, and says why
                "conveyor.dev", "v1alpha1", kube_namespace, "connectors", name,
                {"metadata": {"annotations": {"strimzi.io/connector-offsets": "alter"}}})
            waiting = eventually(lambda: api.events(kube_namespace, name, "OffsetsWaiting"), message="waiting")
            assert "spec.state" in waiting[0].message
            before = committed_offsets(kafka_bootstrap, group, topic, 2)
            api.custom.patch_namespaced_custom_object("conveyor.dev", "v1alpha1", kube_namespace, "connectors", name,
                                                      {"spec": {"state": "stopped"}})
            eventually(lambda: api.events(kube_namespace, name, "OffsetsAltered"), timeout_s=90, message="altered")
            assert committed_offsets(kafka_bootstrap, group, topic, 2) == {**before, 0: 1}
            # listed again: the operator's own ConfigMap is updated (its other keys kept)
            api.core.patch_namespaced_config_map(f"{name}-listed", kube_namespace, {"data": {"note": "kept"}})
            annotate("list")
            again = api.core.read_namespaced_config_map(f"{name}-listed", kube_namespace)
            relisted = json.loads(again.data["offsets.json"])["offsets"]
            assert sorted((o["partition"]["kafka_partition"], o["offset"]["kafka_offset"]) for o in relisted) \
                == sorted({**before, 0: 1}.items())
            assert again.data["note"] == "kept"

            annotate("reset")
            eventually(lambda: api.events(kube_namespace, name, "OffsetsReset"), message="the OffsetsReset Event")
            assert committed_offsets(kafka_bootstrap, group, topic, 2) == {}
            annotate("rewind")
            assert "not one of list, alter, reset" in api.events(kube_namespace, name, "OffsetsFailed")[0].message
        finally:
            driver.stop()


# --- the control API's credentials ---------------------------------------------------------------

def test_the_control_secret_is_derived_created_once_owned_rotated_and_authenticates_the_operator(
        kube_api, kube_namespace, operator, api, kafka_bootstrap, tmp_path, spark):
    """The operator creates ``<name>-control`` owned by the Connector with values it derives from
    its key (it may not read Secrets back); reconciliations leave it alone; a
    ``conveyor.dev/rotate-control-secret`` value replaces it and rolls the driver; its admin token
    is what the operator sends the driver, and a driver serving other tokens is reported
    ``DriverUnauthorized``, not running."""
    name = _name("ctl")
    port = free_port()
    topic = f"ctl-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    with operator(port):
        api.create_connector(connector(name, kube_namespace, "noop-sink", kafka_bootstrap, {"topics": topic}))
        secret = eventually(lambda: api.core.read_namespaced_secret(f"{name}-control", kube_namespace),
                            message="the control Secret")
        owner = secret.metadata.owner_references[0]
        assert (owner.kind, owner.name, owner.controller) == ("Connector", name, True)
        assert set(secret.data) == {"admin-token", "task-token", "spark-auth-secret"}
        assert len(set(secret.data.values())) == 3, "three values, each its own"
        version = secret.metadata.annotations["conveyor.dev/control-secret-version"]
        eventually(lambda: (api.get_connector(kube_namespace, name).get("status") or {}).get("controlSecretVersion")
                   == version, message="status.controlSecretVersion")
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace), message="Deployment")
        kube_api.kubectl("scale", f"connector/{name}", "-n", kube_namespace, "--replicas=2")
        eventually(lambda: (api.get_connector(kube_namespace, name).get("status") or {}).get("tasksMax") == 2,
                   message="a second reconciliation")
        again = api.core.read_namespaced_secret(f"{name}-control", kube_namespace)
        assert again.data == secret.data and again.metadata.resource_version == secret.metadata.resource_version
        template = api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace).spec.template
        assert template.metadata.annotations["conveyor.dev/control-secret-version"] == version

        # a new rotation value: new values, a new version, and the driver's pods roll onto them
        api.custom.patch_namespaced_custom_object(
            "conveyor.dev", "v1alpha1", kube_namespace, "connectors", name,
            {"metadata": {"annotations": {"conveyor.dev/rotate-control-secret": "2026-11-28"}}})
        rotated = eventually(lambda: (s := api.core.read_namespaced_secret(f"{name}-control", kube_namespace))
                             .metadata.uid != secret.metadata.uid and s, message="a new control Secret")
        assert rotated.metadata.owner_references[0].uid == owner.uid
        assert not set(rotated.data.values()) & set(secret.data.values()), "every value is new"
        new_version = rotated.metadata.annotations["conveyor.dev/control-secret-version"]
        assert new_version != version
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace).spec.template
                   .metadata.annotations["conveyor.dev/control-secret-version"] == new_version,
                   message="the pod template rolled onto the new Secret")

        # a driver with tokens of its own: the operator's calls are refused, and it says so
        impostor = LocalDriver(spark, api, kube_namespace, name, tmp_path, port, tokens=ControlTokens(
            admin="not-the-operators-admin-token", task="not-the-operators-task-token"))
        try:
            ready = eventually(lambda: (c := api.condition(kube_namespace, name, "Ready")) and
                               c.get("reason") == "DriverUnauthorized" and c, timeout_s=120,
                               message="Ready=False DriverUnauthorized")
            assert "401" in ready["message"] and "not-the-operators" not in ready["message"]
        finally:
            impostor.stop()

        driver = LocalDriver(spark, api, kube_namespace, name, tmp_path, port)   # the Secret's tokens, as mounted
        try:
            driver.wait_running(tasks=2)
            eventually(lambda: (api.condition(kube_namespace, name, "Ready") or {}).get("status") == "True",
                       timeout_s=120, message="Ready=True once the driver holds the Secret's tokens")
        finally:
            driver.stop()
        api.custom.patch_namespaced_custom_object("conveyor.dev", "v1alpha1", kube_namespace, "connectors", name,
                                                  {"metadata": {"annotations": {"conveyor.dev/skip-cleanup": "true"}}})
        api.delete_connector(kube_namespace, name)
        eventually(lambda: api.get_connector(kube_namespace, name) is None, timeout_s=120, message="Connector gone")


def test_a_first_apply_that_fails_after_its_control_secret_is_retried_to_the_end(kube_api, kube_namespace,
                                                                                 operator, api):
    """A quota that admits no Deployment fails the first apply after the control Secret was
    created; the retry must not take that Secret for an earlier Connector's (it would wait for it
    forever): once the quota is gone, the Connector is applied."""
    name = _name("quota")
    api.core.create_namespaced_resource_quota(kube_namespace, client.V1ResourceQuota(
        metadata=client.V1ObjectMeta(name="no-deployments"),
        spec=client.V1ResourceQuotaSpec(hard={"count/deployments.apps": "0"})))
    # play the quota controller (this tier runs none): the usage the admission plugin checks against
    api.core.patch_namespaced_resource_quota_status("no-deployments", kube_namespace, {"status": {
        "hard": {"count/deployments.apps": "0"}, "used": {"count/deployments.apps": "0"}}})
    with operator():
        api.create_connector(connector(name, kube_namespace, "noop-sink", "k:9092", {"topics": "t"}))
        eventually(lambda: api.core.read_namespaced_config_map(f"{name}-connector", kube_namespace), timeout_s=30,
                   message="the first apply under way (its ConfigMap)")
        time.sleep(6)  # the first retry (after 5 s) fails on the quota too
        with pytest.raises(client.ApiException):
            api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace)
        api.core.delete_namespaced_resource_quota("no-deployments", kube_namespace)
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace), timeout_s=60,
                   message="the Deployment, once the quota is gone")
        progressing = eventually(lambda: (c := api.condition(kube_namespace, name, "Progressing")) and
                                 c["reason"] == "Reconciled" and c, timeout_s=30, message="Progressing Reconciled")
        assert progressing["status"] == "True", "not WaitingForPredecessor on its own Secret"


def test_a_first_apply_cut_short_before_its_status_is_finished_by_the_next_operator(kube_api, kube_namespace,
                                                                                 operator, api):
    """An operator killed after a first apply made the control Secret and the Deployment, before
    it wrote ``status.configHash``: the next operator must not take that Secret for an earlier
    Connector's and wait for it forever (found by the e2e lifecycle test, which kills the
    operator mid-create). Played here by removing what the first apply recorded."""
    name = _name("cut")
    with operator():
        api.create_connector(connector(name, kube_namespace, "noop-sink", "k:9092", {"topics": "t"}))
        eventually(lambda: (api.get_connector(kube_namespace, name) or {}).get("status", {}).get("configHash"),
                   message="the first apply recorded")
    api.custom.patch_namespaced_custom_object_status(GROUP, VERSION, kube_namespace, PLURAL, name, {
        "status": {"configHash": None, "controlSecretVersion": None, "observedGeneration": None}})
    with operator():
        _patch_connector(api, kube_namespace, name, {"spec": {"tasksMax": 2}})

        def settled() -> dict | None:
            progressing = api.condition(kube_namespace, name, "Progressing")
            if progressing and progressing["reason"] == "WaitingForPredecessor":
                return progressing
            status = (api.get_connector(kube_namespace, name) or {}).get("status") or {}
            return progressing if progressing and progressing["reason"] == "Reconciled" and \
                status.get("tasksMax") == 2 else None

        progressing = eventually(settled, timeout_s=60, message="reconciled again")
        assert progressing["reason"] == "Reconciled", progressing
        assert api.get_connector(kube_namespace, name)["status"]["configHash"]


def _writes_since(api: Api, namespace: str, name: str, resource_version: str) -> list[dict]:
    """Every change of the Connector ``name`` after ``resource_version``, from a watch that replays
    them (the API server's watch cache) and ends after 2 s."""
    from kubernetes import watch

    return [event["object"] for event in watch.Watch().stream(
        api.custom.list_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL,
        field_selector=f"metadata.name={name}", resource_version=resource_version, timeout_seconds=2)]


def test_a_create_and_an_edit_cost_the_connector_one_write_of_the_operator_each(kube_namespace, operator, api):
    """Issue 33: kopf's record of the handled spec (status.lastHandledConfiguration) goes in the
    same request as the reconcile's status, and a driver still starting keeps that status: a
    thousand Connectors created at once are a thousand writes, not two or three thousand, and as
    many watch events fewer for the operator to process."""
    name = _name("one-write")
    with operator(env={"CONVEYOR_OPERATOR_DRIVER_START_TIMEOUT_SECONDS": "60"}):
        created = api.create_connector(connector(name, kube_namespace, "noop-sink", "k:9092", {"topics": "t"},
                                                 deletionPolicy={"cleanup": False}))
        eventually(lambda: (api.get_connector(kube_namespace, name).get("status") or {}).get("observedGeneration")
                   == 1, message="observedGeneration 1")
        time.sleep(3)  # status reads of the driver that does not answer, which write nothing
        writes = _writes_since(api, kube_namespace, name, created["metadata"]["resourceVersion"])
        assert len(writes) == 1, [w["metadata"]["managedFields"] for w in writes]
        status = writes[0]["status"]
        assert json.loads(status["lastHandledConfiguration"])["spec"]["tasksMax"] == 1
        assert status["configHash"] and status["conditions"]
        assert not any(k.startswith("kopf.") for k in writes[0]["metadata"].get("annotations") or {})

        edited = api.custom.patch_namespaced_custom_object(GROUP, VERSION, kube_namespace, PLURAL, name,
                                                           {"spec": {"tasksMax": 2}})
        eventually(lambda: (api.get_connector(kube_namespace, name).get("status") or {}).get("observedGeneration")
                   == 2, message="observedGeneration 2")
        time.sleep(3)
        writes = _writes_since(api, kube_namespace, name, edited["metadata"]["resourceVersion"])
        assert len(writes) == 1, [w["metadata"]["managedFields"] for w in writes]
        assert json.loads(writes[0]["status"]["lastHandledConfiguration"])["spec"]["tasksMax"] == 2
        assert writes[0]["status"]["tasksMax"] == 2


@pytest.mark.parametrize("kind", ["ConfigMap", "Secret"])
def test_an_object_of_the_connectors_name_that_is_someone_elses_is_not_taken_over(kube_api, kube_namespace,
                                                                                  operator, api, kind):
    """Someone's ``<name>-connector`` ConfigMap, or ``<name>-control`` Secret (which the operator
    may not read: a dry-run create finds it), is left as it is, and the Connector waits for it."""
    name = _name("taken")
    theirs = f"{name}-connector" if kind == "ConfigMap" else f"{name}-control"
    read, remove = ((api.core.read_namespaced_config_map, api.core.delete_namespaced_config_map) if kind == "ConfigMap"
                    else (api.core.read_namespaced_secret, api.core.delete_namespaced_secret))
    body = client.V1ObjectMeta(name=theirs)
    if kind == "ConfigMap":
        api.core.create_namespaced_config_map(kube_namespace, client.V1ConfigMap(metadata=body, data={"theirs": "keep"}))
    else:
        api.core.create_namespaced_secret(kube_namespace, client.V1Secret(metadata=body, string_data={"theirs": "keep"}))
    with operator():
        api.create_connector(connector(name, kube_namespace, "noop-sink", "k:9092", {"topics": "t"}))
        waiting = eventually(lambda: (api.condition(kube_namespace, name, "Progressing") or {}).get("reason")
                             == "WaitingForPredecessor" and api.condition(kube_namespace, name, "Progressing"),
                             timeout_s=30, message=f"the Connector waits instead of taking the {kind} over")
        assert f"{kind} {theirs}" in waiting["message"]
        kept = read(theirs, kube_namespace)
        data = kept.data if kind == "ConfigMap" else {k: base64.b64decode(v).decode() for k, v in kept.data.items()}
        assert data == {"theirs": "keep"} and not kept.metadata.owner_references
        with pytest.raises(client.ApiException):
            api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace)
        if kind == "Secret":  # nothing is written before the Secret's name is known to be free
            with pytest.raises(client.ApiException):
                api.core.read_namespaced_config_map(f"{name}-connector", kube_namespace)
        remove(theirs, kube_namespace)
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace), timeout_s=30,
                   message="applied once the name is free")


def test_a_first_apply_killed_after_its_control_secret_is_finished_by_the_next_operator(kube_api, kube_namespace,
                                                                                      operator, api):
    """An operator killed right after a first apply created the control Secret, before it applied
    anything else (found by the e2e lifecycle test, which kills the operator mid-create): what it
    left is the Connector's ConfigMap and Secret, both owned by it. The next operator must take the
    Secret for the Connector's own (not wait for it forever) and write it anew, so that values
    planted in it are never used. Played by writing those two objects with the operator down."""
    from conveyor_operator.reconcile import render

    name = _name("killed")
    created = api.create_connector(connector(name, kube_namespace, "noop-sink", "k:9092", {"topics": "t"}))
    owner = render.owner_reference(name, created["metadata"]["uid"])
    labels = {"app.kubernetes.io/managed-by": "conveyor-operator"}
    api.core.create_namespaced_config_map(kube_namespace, {
        "metadata": {"name": f"{name}-connector", "labels": labels, "ownerReferences": [owner]}, "data": {}})
    api.core.create_namespaced_secret(kube_namespace, {
        "metadata": {"name": f"{name}-control", "labels": labels, "ownerReferences": [owner]},
        "stringData": {"admin-token": "planted"}})
    with operator():
        eventually(lambda: api.apps.read_namespaced_deployment(f"{name}-driver", kube_namespace), timeout_s=30,
                   message="the Deployment: the Secret taken for the Connector's own")
        progressing = eventually(lambda: (c := api.condition(kube_namespace, name, "Progressing")) and
                                 c["reason"] != "WaitingForPredecessor" and c, timeout_s=30, message="reconciled")
        assert progressing["reason"] == "Reconciled", progressing
    secret = api.core.read_namespaced_secret(f"{name}-control", kube_namespace).data
    assert base64.b64decode(secret["admin-token"]) != b"planted" and "task-token" in secret
