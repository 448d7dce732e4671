"""Pure rendering of a Connector into Kubernetes objects (plain dicts; the behaviour
against a real API server is in tests/kube)."""

import pydantic
import pytest
import yaml
from conveyor_operator import names
from conveyor_operator.reconcile import render, spark_pods
from conveyor_operator.settings import OperatorSettings

from conveyor import spark_security
from conveyor.manifest import ConnectorManifest

SETTINGS = OperatorSettings(runtime_image="registry.example/conveyor:1.2.3")


def manifest(**spec):
    base = {"class": "postgres-sink", "tasksMax": 2, "kafka": {"bootstrapServers": "kafka:9092"},
            "config": {"topics": "orders", "connection.url": "${secret:pg:url}"},
            "configFrom": [{"secretRef": {"name": "pg"}}], "shutdown": {"gracePeriodSeconds": 30}}
    base.update(spec)
    return ConnectorManifest.from_dict({"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
                                        "metadata": {"name": "orders", "namespace": "data"}, "spec": base})


def by_kind(objs):
    return {o["kind"]: o for o in objs}


def test_objects_are_owned_labelled_and_in_apply_order():
    objs = render.objects(manifest(), "uid-1", 3, SETTINGS)
    assert [o["kind"] for o in objs] == ["ConfigMap", "Service", "PodDisruptionBudget", "NetworkPolicy",
                                         "NetworkPolicy", "Deployment"]
    for o in objs:
        assert o["metadata"]["namespace"] == "data"
        assert o["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
        assert o["metadata"]["labels"][names.LABEL_CONNECTOR] == "orders"


def test_disruption_budget_lets_one_pod_of_the_connector_go_at_a_time():
    pdb = by_kind(render.objects(manifest(tasksMax=2), "u", 1, SETTINGS))["PodDisruptionBudget"]
    assert pdb["apiVersion"] == "policy/v1"
    # a driver and two executors (tasksMax 2, one core each): two of the three must stay
    assert pdb["spec"]["minAvailable"] == 2
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    selector = pdb["spec"]["selector"]
    assert selector["matchLabels"] == {names.LABEL_CONNECTOR: "orders"}
    assert selector["matchExpressions"] == [{"key": names.LABEL_COMPONENT, "operator": "In",
                                             "values": [names.DRIVER, names.EXECUTOR]}]  # never the cleanup Job
    scaled = by_kind(render.objects(manifest(tasksMax=5), "u", 1, SETTINGS))["PodDisruptionBudget"]
    assert scaled["spec"]["minAvailable"] == 5  # follows the executor pods tasksMax needs
    local = by_kind(render.objects(manifest(spark={"executor": {"instances": 0}}), "u", 1, SETTINGS))
    assert local["PodDisruptionBudget"]["spec"]["minAvailable"] == 0  # the driver alone may always go


def test_namespace_spark_rbac_is_shared_and_not_owned():
    executor, sa, binding = render.namespace_objects(manifest(), SETTINGS)
    assert (executor["kind"], sa["kind"], binding["kind"]) == ("ServiceAccount", "ServiceAccount", "RoleBinding")
    assert render.namespace_objects(manifest(tasksMax=3), SETTINGS) == [executor, sa, binding]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": SETTINGS.spark_driver_cluster_role}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "conveyor-spark", "namespace": "data"}]
    for o in (sa, binding):
        assert o["metadata"]["name"] == "conveyor-spark" and o["metadata"]["namespace"] == "data"
    for o in (executor, sa, binding):
        assert "ownerReferences" not in o["metadata"]
        assert names.LABEL_CONNECTOR not in o["metadata"]["labels"]
    namespaced = OperatorSettings(spark_driver_cluster_role="rel-conveyor-spark-driver", spark_driver_role_kind="Role")
    assert render.namespace_objects(manifest(), namespaced)[2]["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "rel-conveyor-spark-driver"}
    # a spec with its own driver account keeps it; executors still run without API rights
    assert render.namespace_objects(manifest(spark={"serviceAccount": "mine"}), SETTINGS) == [executor]


def test_executors_and_cleanup_jobs_run_without_api_permissions_or_token():
    """Issue 13 item 4: a ServiceAccount bound to nothing, whose token is never mounted."""
    (executor, *_) = render.namespace_objects(manifest(), SETTINGS)
    assert executor["metadata"]["name"] == names.EXECUTOR_SERVICE_ACCOUNT == "conveyor-executor"
    assert executor["automountServiceAccountToken"] is False
    for spec in ({}, {"spark": {"serviceAccount": "mine"}}):
        m = manifest(**spec)
        template = render.executor_pod_template(m, SETTINGS)["spec"]
        job = render.cleanup_job(m, "u", SETTINGS, attempt=1)["spec"]["template"]["spec"]
        for pod in (template, job):
            assert pod["serviceAccountName"] == "conveyor-executor"
            assert pod["automountServiceAccountToken"] is False
        conf = render.spark_conf(m, SETTINGS)
        assert conf["spark.kubernetes.authenticate.executor.serviceAccountName"] == "conveyor-executor"
        driver = by_kind(render.objects(m, "u", 1, SETTINGS))["Deployment"]["spec"]["template"]["spec"]
        assert driver["serviceAccountName"] == spec.get("spark", {}).get("serviceAccount", "conveyor-spark")
        assert "automountServiceAccountToken" not in driver, "the driver needs its token (executor pods)"


def test_the_driver_needs_no_config_map_or_service_of_spark_and_its_role_says_so():
    conf = render.spark_conf(manifest(), SETTINGS)
    assert conf["spark.kubernetes.executor.disableConfigMap"] == "true"
    assert conf["spark.kubernetes.driver.service.deleteOnTermination"] == "false"
    granted = {(r, v) for rule in render.SPARK_ROLE_RULES for r in rule["resources"] for v in rule["verbs"]}
    assert {v for r, v in granted if r == "configmaps"} == {"create"}, "the namespace-deletion probe only"
    assert not {r for r, _ in granted} & {"services", "secrets", "pods/exec", "pods/log", "serviceaccounts"}


def test_driver_mounts_manifest_and_executor_template_from_one_config_map():
    objs = render.objects(manifest(), "u", 1, SETTINGS)
    cm, dep = by_kind(objs)["ConfigMap"], by_kind(objs)["Deployment"]
    pod = dep["spec"]["template"]["spec"]
    mounted = {}
    for volume in pod["volumes"]:
        if volume.get("configMap", {}).get("name") == cm["metadata"]["name"]:
            mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"])
            for item in volume["configMap"]["items"]:
                mounted[f"{mount['mountPath']}/{item['path']}"] = item["key"]
    assert mounted == {render.MANIFEST_PATH: "connector.yaml", render.EXECUTOR_TEMPLATE_PATH: "executor-pod.yaml"}
    assert set(cm["data"]) == {"connector.yaml", "executor-pod.yaml"}
    conf = dict(a.split("=", 1) for a in pod["containers"][0]["args"] if a.startswith("spark."))
    assert conf["spark.kubernetes.executor.podTemplateFile"] == render.EXECUTOR_TEMPLATE_PATH


def test_deployment_runs_conveyor_in_client_mode_with_drain_hook():
    dep = by_kind(render.objects(manifest(), "u", 1, SETTINGS))["Deployment"]
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"] == {"type": "Recreate"}
    pod = dep["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 30 + render.GRACE_MARGIN_SECONDS
    assert pod["serviceAccountName"] == "conveyor-spark"
    container = pod["containers"][0]
    assert container["image"] == "registry.example/conveyor:1.2.3"
    args = container["args"]
    assert args[:2] == ["run", render.MANIFEST_PATH]
    confs = dict(a.split("=", 1) for a in args[args.index("--conf") + 1::2])
    assert confs["spark.master"] == spark_pods.IN_CLUSTER_MASTER
    assert confs["spark.kubernetes.driver.pod.name"] == "$(POD_NAME)"
    assert confs["spark.driver.host"] == "orders-driver.data.svc"
    assert confs["spark.kubernetes.namespace"] == "data"
    assert container["lifecycle"]["preStop"]["exec"]["command"][:2] == ["conveyor", "drain"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/etc/conveyor/secrets/pg" in mounts and "/etc/conveyor/connector" in mounts


def test_user_spark_conf_is_left_to_the_driver_and_zero_executors_runs_locally():
    m = manifest(spark={"sparkConf": {"spark.executor.pyspark.memory": "512m"}, "executor": {"instances": 0}})
    conf = render.spark_conf(m, SETTINGS)
    assert "spark.executor.pyspark.memory" not in conf, "the driver applies the manifest's own keys"
    assert "spark.master" not in conf


def test_spark_rpc_is_authenticated_and_encrypted_on_every_master():
    for instances in (0, 2):
        conf = render.spark_conf(manifest(spark={"executor": {"instances": instances}}), SETTINGS)
        assert {k: conf[k] for k in spark_security.ENFORCED} == {
            "spark.authenticate": "true", "spark.network.crypto.enabled": "true",
            "spark.network.crypto.authEngineVersion": "2", "spark.network.crypto.cipher": "AES/GCM/NoPadding",
            "spark.network.crypto.saslFallback": "false"}
        assert any(k.startswith("spark.authenticate.secret") for k in conf) == (instances > 0)
        args = by_kind(render.objects(manifest(spark={"executor": {"instances": instances}}), "u", 1,
                                      SETTINGS))["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"]
        assert "spark.authenticate=true" in args and "spark.network.crypto.cipher=AES/GCM/NoPadding" in args


def test_secret_file_keys_come_as_a_pair_and_only_with_executor_pods():
    """The file is the control Secret's spark-auth-secret, mounted in driver and executor pods."""
    assert spark_security.SECRET_FILE == f"{render.CONTROL_DIR}/spark-auth-secret"
    files = {"spark.authenticate.secret.driver.file": "/etc/conveyor/control/spark-auth-secret",
             "spark.authenticate.secret.executor.file": "/etc/conveyor/control/spark-auth-secret",
             "spark.authenticate.secret.file": "/etc/conveyor/control/spark-auth-secret"}
    with_executors = render.spark_conf(manifest(), SETTINGS)
    assert {k: with_executors[k] for k in files} == files
    local = render.spark_conf(manifest(spark={"executor": {"instances": 0}}), SETTINGS)
    assert not set(files) & set(local), "Spark refuses secret files on a local master"


def test_every_property_the_operator_renders_is_refused_in_spark_conf():
    conf = render.spark_conf(manifest(), SETTINGS)
    refused = spark_security.refused_spark_conf(conf)
    assert set(refused) == set(conf), set(conf) - set(refused)


def test_manifest_keeps_secret_references_not_values():
    cm = render.connector_config_map(manifest(), "u", 1, SETTINGS)
    assert "${secret:pg:url}" in cm["data"]["connector.yaml"]
    assert ConnectorManifest.from_dict(__import__("yaml").safe_load(cm["data"]["connector.yaml"])).name == "orders"


def test_executor_template_has_drain_hook_pointing_at_the_driver_service():
    template = render.executor_pod_template(manifest(), SETTINGS)
    hook = template["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
    assert "http://orders-driver.data.svc:8083" in hook
    assert template["metadata"]["labels"][names.LABEL_COMPONENT] == names.EXECUTOR


def test_hashes_separate_live_changes_from_rolling_ones():
    a, b = manifest(), manifest(config={"topics": "other"})
    assert render.spec_hash(a) == render.spec_hash(b)
    assert render.config_hash(a) != render.config_hash(b)
    c = manifest(kafka={"bootstrapServers": "other:9092"})
    assert render.spec_hash(a) != render.spec_hash(c)


def test_cleanup_job_deletes_offsets_only_when_asked():
    job = render.cleanup_job(manifest(), "u", SETTINGS, attempt=1)
    assert "--delete-offsets" not in job["spec"]["template"]["spec"]["containers"][0]["args"]
    job = render.cleanup_job(manifest(deletionPolicy={"offsets": "delete"}), "u", SETTINGS, attempt=1)
    assert job["spec"]["backoffLimit"] == 0
    assert "--delete-offsets" in job["spec"]["template"]["spec"]["containers"][0]["args"]


def test_local_mode_driver_is_sized_for_a_python_worker_per_task():
    def memory(m):
        return by_kind(render.objects(m, "u", 1, SETTINGS))["Deployment"]["spec"]["template"]["spec"][
            "containers"][0]["resources"]["limits"]["memory"]

    assert memory(manifest(tasksMax=3)) == "1408Mi"  # executor pods: the driver's heap + overhead only
    local = {"executor": {"instances": 0}}
    assert memory(manifest(tasksMax=3, spark=local)) == f"{1408 + 3 * 384}Mi"
    assert memory(manifest(tasksMax=3, spark={**local, "sparkConf": {"spark.executor.pyspark.memory": "1g"}})) \
        == f"{1408 + 3 * 1024}Mi"
    # more tasks in local mode need more slots (local[tasksMax]) and memory: the driver rolls
    assert render.spec_hash(manifest(tasksMax=3, spark=local)) != render.spec_hash(manifest(tasksMax=4, spark=local))
    assert render.spec_hash(manifest(tasksMax=1)) == render.spec_hash(manifest(tasksMax=1, config={"topics": "x"}))


def test_driver_cpu_request_and_limit_follow_sparks_driver_properties():
    def resources(m):
        return by_kind(render.objects(m, "u", 1, SETTINGS))["Deployment"]["spec"]["template"]["spec"][
            "containers"][0]["resources"]

    assert resources(manifest())["requests"]["cpu"] == "1" and "cpu" not in resources(manifest())["limits"]
    custom = resources(manifest(spark={"sparkConf": {"spark.kubernetes.driver.request.cores": "250m",
                                                     "spark.kubernetes.driver.limit.cores": "2"}}))
    assert custom["requests"]["cpu"] == "250m" and custom["limits"]["cpu"] == "2"


def test_container_memory_adds_spark_overhead():
    assert spark_pods.container_memory("1g") == "1408Mi"
    assert spark_pods.container_memory("8g") == f"{8192 + 819}Mi"


def test_the_kubernetes_example_is_a_valid_connector():
    from pathlib import Path

    import yaml

    path = Path(__file__).resolve().parents[2] / "examples" / "kubernetes" / "orders-audit.yaml"
    m = ConnectorManifest.from_dict(yaml.safe_load(path.read_text()))
    assert m.spec.secret_names() == ["orders-db", "kafka-credentials"]
    dep = by_kind(render.objects(m, "u", 1, SETTINGS))["Deployment"]
    mounts = {v["mountPath"] for v in dep["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert {"/etc/conveyor/secrets/orders-db", "/etc/conveyor/secrets/kafka-credentials"} <= mounts


def _driver_conf(m):
    args = by_kind(render.objects(m, "u", 1, SETTINGS))["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"]
    return dict(a.split("=", 1) for a in args[args.index("--conf") + 1::2])


def test_driver_binds_its_pod_ip_which_executors_can_reach():
    """Executors are handed the driver's bind address (useDriverPodIP): 0.0.0.0 made every
    executor fail with ``Failed to connect to /0.0.0.0:7078`` on a real node."""
    dep = by_kind(render.objects(manifest(), "u", 1, SETTINGS))["Deployment"]
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert _driver_conf(manifest())["spark.driver.bindAddress"] == "$(POD_IP)"
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"


def test_executor_pods_are_named_name_exec_n():
    assert _driver_conf(manifest())["spark.kubernetes.executor.podNamePrefix"] == "orders"


def test_every_task_gets_an_executor_core():
    assert render.executor_instances(manifest()) == 2, "tasksMax 2 on 1-core executors"
    assert _driver_conf(manifest())["spark.executor.instances"] == str(manifest().spec.spark.executor.instances), \
        "the least kept; the driver raises it until every task has a core"
    assert render.executor_instances(manifest(tasksMax=3, spark={"executor": {"cores": 2}})) == 2
    assert render.executor_instances(manifest(tasksMax=1, spark={"executor": {"instances": 3}})) == 3
    assert render.executor_instances(manifest(tasksMax=5, spark={"executor": {"instances": 0}})) == 0


def test_a_tasks_max_change_with_executor_pods_never_rolls_the_driver():
    """Issue 34, live task changes: the driver asks Spark for the executor pods more tasks need."""
    two_cores = {"executor": {"cores": 2}}
    one, two, three = (manifest(tasksMax=n, spark=two_cores) for n in (1, 2, 3))
    assert render.spec_hash(one) == render.spec_hash(two) == render.spec_hash(three)
    deployments = [by_kind(render.objects(m, "u", 1, SETTINGS))["Deployment"] for m in (one, three)]
    assert deployments[0]["spec"]["template"] == deployments[1]["spec"]["template"], "nothing in the pod changes"
    budgets = [by_kind(render.objects(m, "u", 1, SETTINGS))["PodDisruptionBudget"] for m in (one, three)]
    assert [b["spec"]["minAvailable"] for b in budgets] == [1, 2], "the budget follows the executors"


ARCHIVE_VOLUME = {
    "spark.kubernetes.driver.volumes.emptyDir.archive.mount.path": "/archive",
    "spark.kubernetes.driver.volumes.emptyDir.archive.options.sizeLimit": "1Gi",
    "spark.kubernetes.driver.volumes.persistentVolumeClaim.state.mount.path": "/state",
    "spark.kubernetes.driver.volumes.persistentVolumeClaim.state.mount.readOnly": "true",
    "spark.kubernetes.driver.volumes.persistentVolumeClaim.state.options.claimName": "shared",
    "spark.kubernetes.executor.volumes.emptyDir.archive.mount.path": "/archive",
}


def test_spark_driver_volume_properties_mount_into_the_driver_pod_and_cleanup_job():
    spec = manifest(spark={"sparkConf": ARCHIVE_VOLUME})
    pod = render.driver_deployment(spec, "u", SETTINGS)["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["archive"] == {"name": "archive", "emptyDir": {"sizeLimit": "1Gi"}}
    assert volumes["state"] == {"name": "state", "persistentVolumeClaim": {"claimName": "shared"}}
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["archive"] == {"name": "archive", "mountPath": "/archive"}
    assert mounts["state"] == {"name": "state", "mountPath": "/state", "readOnly": True}
    job = render.cleanup_job(spec, "u", SETTINGS, attempt=1)["spec"]["template"]["spec"]
    assert {v["name"] for v in job["volumes"]} >= {"archive", "state"}
    # Spark mounts the executors' volumes from its own properties (the driver reads sparkConf)
    template = render.executor_pod_template(spec, SETTINGS)["spec"]
    assert "archive" not in {v["name"] for v in template["volumes"]}


def _control(pod_spec):
    volume = next(v for v in pod_spec["volumes"] if v["name"] == "control")
    mount = next(m for m in pod_spec["containers"][0]["volumeMounts"] if m["name"] == "control")
    env = {e["name"]: e.get("value") for e in pod_spec["containers"][0].get("env", [])}
    return volume["secret"], mount, env


def test_the_control_secret_is_mounted_by_need():
    """The driver gets the admin token, the executors only the task token and Spark's secret,
    the cleanup Job (which calls neither the control API nor Spark) nothing."""
    objs = by_kind(render.objects(manifest(), "u", 1, SETTINGS, control_secret_version="0123456789abcdef"))
    template = objs["Deployment"]["spec"]["template"]
    secret, mount, env = _control(template["spec"])
    assert secret["secretName"] == "orders-control" and secret["defaultMode"] == 0o444
    assert [i["key"] for i in secret["items"]] == ["admin-token", "task-token", "spark-auth-secret"]
    assert mount == {"name": "control", "mountPath": "/etc/conveyor/control", "readOnly": True}
    assert env["CONVEYOR_CONTROL_TOKEN_DIR"] == "/etc/conveyor/control"
    assert env["CONVEYOR_CONTROL_TOKEN_FILE"] == "/etc/conveyor/control/admin-token"  # the preStop drain
    assert template["metadata"]["annotations"][names.ANNOTATION_CONTROL_SECRET_VERSION] == "0123456789abcdef"

    secret, _, env = _control(render.executor_pod_template(manifest(), SETTINGS)["spec"])
    assert [i["key"] for i in secret["items"]] == ["task-token", "spark-auth-secret"]
    assert env["CONVEYOR_CONTROL_TOKEN_FILE"] == "/etc/conveyor/control/task-token"
    assert "CONVEYOR_CONTROL_TOKEN_DIR" not in env

    job = render.cleanup_job(manifest(), "u", SETTINGS, attempt=1)["spec"]["template"]["spec"]
    assert "orders-control" not in str(job)


def test_a_new_control_secret_rolls_the_driver():
    one = render.driver_deployment(manifest(), "u", SETTINGS, control_secret_version="a")
    two = render.driver_deployment(manifest(), "u", SETTINGS, control_secret_version="b")
    assert one["spec"]["template"] != two["spec"]["template"]


def _pods(m, settings=SETTINGS):
    """The pod specs the operator renders: driver, executor template, cleanup Job."""
    return {
        "driver": render.driver_deployment(m, "u", settings)["spec"]["template"]["spec"],
        "executor": render.executor_pod_template(m, settings)["spec"],
        "cleanup": render.cleanup_job(m, "u", settings, attempt=1)["spec"]["template"]["spec"],
    }


def test_every_pod_is_pod_security_restricted_with_a_read_only_root_and_no_fixed_uid():
    """Pod Security Standards "restricted" (the real admission check is tests/kube/test_pod_security.py):
    non-root, RuntimeDefault seccomp, no escalation, every capability dropped; and a read-only
    root filesystem whose one writable path, /tmp, is the working directory and HOME."""
    for role, pod in _pods(manifest(configFrom=[{"secretRef": {"name": "pg"}}, {"configMapRef": {"name": "c"}}],
                                    config={"topics": "o", "connection.url": "${secret:pg:url}",
                                            "x": "${configmap:c:k}"})).items():
        assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}, role
        (container,) = pod["containers"]
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True, "runAsNonRoot": True}, role
        assert container["workingDir"] == "/tmp", role
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["HOME"] == "/tmp", role
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["tmp"] == {"name": "tmp", "emptyDir": {}}, role
        assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"], role
        files = [v.get("secret") or v.get("configMap") for v in pod["volumes"] if "secret" in v or "configMap" in v]
        assert files and all(f["defaultMode"] == 0o444 for f in files), (role, files)  # readable without fsGroup


def test_the_pods_uid_and_fs_group_are_pinned_only_when_the_settings_say_so():
    pinned = OperatorSettings(pod_run_as_user=1000650000, pod_fs_group=1000650000)
    for role, pod in _pods(manifest(), pinned).items():
        assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"},
                                          "runAsUser": 1000650000, "fsGroup": 1000650000}, role
    executor_yaml = render.connector_config_map(manifest(), "u", 1, pinned)["data"]["executor-pod.yaml"]
    assert yaml.safe_load(executor_yaml)["spec"]["securityContext"]["runAsUser"] == 1000650000


def test_pod_settings_come_from_the_environment_and_empty_means_unset():
    env = {"CONVEYOR_OPERATOR_POD_RUN_AS_USER": "1000650000", "CONVEYOR_OPERATOR_POD_FS_GROUP": ""}
    settings = OperatorSettings.from_env(env)
    assert settings.pod_run_as_user == 1000650000 and settings.pod_fs_group is None
    assert OperatorSettings.from_env({}).pod_run_as_user is None
    with pytest.raises(pydantic.ValidationError):
        OperatorSettings.from_env({"CONVEYOR_OPERATOR_POD_RUN_AS_USER": "0"})  # root: never


def test_the_platforms_spark_conf_globs_reach_the_pods_that_read_the_manifest():
    platform = OperatorSettings(runtime_image="registry.example/conveyor:1.2.3",
                                allowed_spark_conf=["spark.jars.packages", "spark.eventLog.*"])
    m = ConnectorManifest.from_dict(
        {"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "metadata": {"name": "orders", "namespace": "d"},
         "spec": {"class": "noop-sink", "kafka": {"bootstrapServers": "k:1"}, "config": {"topics": "t"},
                  "spark": {"sparkConf": {"spark.jars.packages": "org.example:lib:1"}}}},
        allowed_spark_conf=platform.allowed_spark_conf)
    driver = by_kind(render.objects(m, "u", 1, platform))["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    job = render.cleanup_job(m, "u", platform, attempt=1)["spec"]["template"]["spec"]["containers"][0]
    for container in (driver, job):
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env[spark_security.ALLOWED_ENV] == "spark.jars.packages,spark.eventLog.*"


def test_executor_pods_mount_no_secret_but_the_connectors_control_secret():
    """The driver resolves the config and the Kafka credentials; executors get them over Spark's
    encrypted RPC, so the drivers' admission policy may refuse every other Secret (issue 28, item 3)."""
    m = manifest(kafka={"bootstrapServers": "k:9093", "tls": {"trustedCertificate": {"name": "kafka-ca", "key": "ca.crt"}},
                        "authentication": {"type": "plain", "username": "u",
                                           "passwordSecret": {"name": "kafka-credentials", "key": "password"}}})
    template = render.executor_pod_template(m, SETTINGS)["spec"]
    secrets = [v["secret"]["secretName"] for v in template["volumes"] if "secret" in v]
    assert secrets == ["orders-control"]
    assert not [v for v in template["volumes"] if "configMap" in v or "projected" in v]
    driver = by_kind(render.objects(m, "u", 1, SETTINGS))["Deployment"]["spec"]["template"]["spec"]
    assert {"pg", "kafka-ca", "kafka-credentials"} <= {v["secret"]["secretName"] for v in driver["volumes"]
                                                         if "secret" in v}


def test_the_driver_pod_and_cleanup_job_follow_sparks_node_selectors():
    """``spark.kubernetes.node.selector.*`` is every pod's, ``spark.kubernetes.driver.node.selector.*``
    the driver's and wins; Spark puts the executors' on their pods itself."""
    conf = {"spark.kubernetes.node.selector.pool": "data", "spark.kubernetes.node.selector.zone": "a",
            "spark.kubernetes.driver.node.selector.zone": "b",
            "spark.kubernetes.executor.node.selector.disk": "ssd"}
    spec = manifest(spark={"sparkConf": conf})
    driver = render.driver_deployment(spec, "u", SETTINGS)["spec"]["template"]["spec"]
    assert driver["nodeSelector"] == {"pool": "data", "zone": "b"}
    job = render.cleanup_job(spec, "u", SETTINGS, attempt=1)["spec"]["template"]["spec"]
    assert job["nodeSelector"] == {"pool": "data", "zone": "b"}
    assert "nodeSelector" not in render.driver_deployment(manifest(), "u", SETTINGS)["spec"]["template"]["spec"]
    assert "nodeSelector" not in render.executor_pod_template(spec, SETTINGS)["spec"]
