"""Helpers of the end-to-end tests: Connector bodies, topics, rows, waits (bounded in time)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

from conveyor.testing.node_images import BUSYBOX_IMAGE
from conveyor.testing.runs import wait_until

T = TypeVar("T")

#: Driver and executors request a quarter core each (Spark's request.cores properties), so a
#: few connectors fit the 2-core node at once.
SMALL_SPARK = {
    "driver": {"cores": 1, "memory": "512m"},
    "executor": {"instances": 1, "cores": 1, "memory": "512m"},
    "sparkConf": {"spark.kubernetes.executor.request.cores": "250m", "spark.kubernetes.driver.request.cores": "250m"},
}


def connector(name: str, namespace: str, connector_class: str, bootstrap: str, config: dict[str, Any],
              **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"class": connector_class, "kafka": {"bootstrapServers": bootstrap}, "config": config,
                     "spark": SMALL_SPARK, **spec}}


def apply(node, body: dict[str, Any]) -> None:
    node.kubectl("apply", "-f", "-", input=json.dumps(body))


def get(node, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
    out = node.kubectl("get", kind, name, "-n", namespace, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def pods(node, namespace: str, selector: str) -> list[dict[str, Any]]:
    out = node.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json")
    return json.loads(out.stdout)["items"]


def condition(body: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    conditions = ((body or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == type_), None)


def eventually(probe: Callable[[], T], timeout_s: float, message: str, interval_s: float = 1.0) -> T:
    return wait_until(probe, timeout_s, message, interval_s)


def evict(node, namespace: str, pod: str) -> None:
    """Evict ``pod`` through the Eviction API (as ``kubectl drain`` does: the PodDisruptionBudget applies)."""
    from kubernetes import client

    with node.api_client() as api:
        client.CoreV1Api(api).create_namespaced_pod_eviction(
            pod, namespace, client.V1Eviction(metadata=client.V1ObjectMeta(name=pod, namespace=namespace)))


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    futures[topic].result(30)


def row_count(url: str, table: str, distinct: str | None = None) -> int:
    """Rows of ``table`` (0 before it exists); with ``distinct``, the distinct values of that column."""
    import psycopg

    what = f'DISTINCT "{distinct}"' if distinct else "*"
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            return conn.execute(f'SELECT count({what}) FROM "{table}"').fetchone()[0]
    except psycopg.errors.UndefinedTable:
        return 0


def tasks_in(node, namespace: str, name: str, state: str, count: int) -> list[dict[str, Any]] | None:
    """The Connector's ``count`` tasks from its status once all are ``state`` and it is Ready, else None."""
    status = (get(node, "connector", name, namespace) or {}).get("status") or {}
    tasks = status.get("tasks") or []
    ready = condition({"status": status}, "Ready") or {}
    if len(tasks) == count and all(t["state"] == state for t in tasks) and ready.get("status") == "True":
        return tasks
    return None


def stopped(node, namespace: str, name: str) -> bool:
    """Whether the Connector has stopped and is Ready: its tasks all read ``STOPPED``, or, as Kafka
    Connect drops a stopped connector's tasks, none are left and ``status.connector.state`` reads
    ``STOPPED`` (the driver sets it only once every task's stop has returned)."""
    status = (get(node, "connector", name, namespace) or {}).get("status") or {}
    tasks = status.get("tasks") or []
    if (condition({"status": status}, "Ready") or {}).get("status") != "True":
        return False
    if tasks:
        return all(t["state"] == "STOPPED" for t in tasks)
    return (status.get("connector") or {}).get("state") == "STOPPED"


def running_pod(node, namespace: str, selector: str) -> str:
    """The name of the one Running, not terminating, pod of ``selector``."""
    names = [p["metadata"]["name"] for p in pods(node, namespace, selector)
             if p["status"]["phase"] == "Running" and not p["metadata"].get("deletionTimestamp")]
    assert len(names) == 1, names
    return names[0]


def busybox_pod(namespace: str, name: str, script: str, node_name: str | None = None) -> dict[str, Any]:
    """A busybox pod running ``script`` on the pod network (on ``node_name`` when given), Pod
    Security "restricted" (``node_namespace`` enforces it): the image's non-root user."""
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                 "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                 "containers": [{"name": "c", "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                                 "command": ["sh", "-c", script],
                                 "securityContext": {"allowPrivilegeEscalation": False,
                                                     "capabilities": {"drop": ["ALL"]}}}]}}
    if node_name:
        pod["spec"]["nodeName"] = node_name
    return pod


def run_pod(node, namespace: str, name: str, script: str, timeout_s: float = 90.0,
            node_name: str | None = None) -> tuple[str, str]:
    """Run :func:`busybox_pod`; (phase, log) once it ended."""
    node.kubectl("apply", "-f", "-", input=json.dumps(busybox_pod(namespace, name, script, node_name)))
    deadline = time.monotonic() + timeout_s
    phase = ""
    while time.monotonic() < deadline:
        phase = node.kubectl("get", "pod", name, "-n", namespace, "-o", "jsonpath={.status.phase}").stdout
        if phase in ("Succeeded", "Failed"):
            break
        time.sleep(0.3)
    logs = node.kubectl("logs", name, "-n", namespace, check=False).stdout
    return phase, logs


def driver_control(node, namespace: str, name: str) -> tuple[str, str]:
    """The driver's control API (``http://<pod IP>:8083``) and the connector's admin token (from
    its ``<name>-control`` Secret), for :func:`conveyor.testing.runs.control_request`."""
    import base64

    pod = eventually(lambda: next((p for p in pods(node, namespace, f"conveyor.dev/connector={name},"
                                                                   "conveyor.dev/component=driver")
                                   if p["status"].get("podIP") and not p["metadata"].get("deletionTimestamp")),
                                  None), 120, "the driver pod's IP")
    secret = json.loads(node.kubectl("get", "secret", f"{name}-control", "-n", namespace, "-o", "json").stdout)
    return f"http://{pod['status']['podIP']}:8083", base64.b64decode(secret["data"]["admin-token"]).decode()


def diagnostics(node, namespace: str, operator_namespace: str = "conveyor-system") -> str:
    """Pods, events and the last log lines of every pod in ``namespace``, the Connectors' status
    and what the operator logged of ``namespace``, its warnings and errors and its last lines
    (for assertion messages)."""
    parts = [node.kubectl("get", "pods,connectors", "-n", namespace, "-o", "wide", check=False).stdout,
             node.kubectl("get", "events", "-n", namespace, "--sort-by=.lastTimestamp", check=False).stdout[-3000:],
             "--- the Connectors' status ---\n" + node.kubectl(
                 "get", "connectors", "-n", namespace, "-o", "jsonpath={range .items[*]}{.metadata.name}: "
                 "{.status}{\"\\n\"}{end}", check=False).stdout[-3000:]]
    for previous in ((), ("--previous",)):
        log = node.kubectl("logs", "-n", operator_namespace, "-l", "app.kubernetes.io/component=operator",
                           "--tail=-1", *previous, check=False).stdout
        lines = log.splitlines()
        mentions = [line for line in lines if namespace in line or " WARNING " in line or " ERROR " in line]
        parts.append(f"--- the operator{' before its last restart' if previous else ''}: its lines of {namespace}, "
                     f"its warnings and errors, then its last lines ---\n"
                     + "\n".join(mentions[-30:]) + "\n...\n" + "\n".join(lines[-15:]))
    for pod in pods(node, namespace, "app.kubernetes.io/managed-by"):
        name = pod["metadata"]["name"]
        parts.append(f"--- {name} ---\n" + node.kubectl("logs", name, "-n", namespace, "--all-containers",
                                                        "--tail=40", check=False).stdout)
        if any(c.get("restartCount") for c in (pod.get("status") or {}).get("containerStatuses") or []):
            parts.append(f"--- {name}, the container before its last restart ---\n" + node.kubectl(
                "logs", name, "-n", namespace, "--all-containers", "--previous", "--tail=60", check=False).stdout)
    return "\n".join(parts)


def kill_container(node, namespace: str, pod: str) -> None:
    """SIGKILL the first container of ``pod`` through containerd, as a crash would (the kubelet
    then restarts it in the same pod)."""
    container_id = node.kubectl("get", "pod", pod, "-n", namespace, "-o",
                                "jsonpath={.status.containerStatuses[0].containerID}").stdout
    node.ctr("tasks", "kill", "--signal", "SIGKILL", container_id.removeprefix("containerd://"))


def operator_pod(node, namespace: str) -> dict[str, Any]:
    (pod,) = pods(node, namespace, "app.kubernetes.io/component=operator")
    return pod


def kill_operator(node, namespace: str) -> int:
    """SIGKILL the (Ready) operator's container; returns its restartCount before the kill."""
    def ready():
        pod = operator_pod(node, namespace)
        statuses = pod["status"].get("containerStatuses") or []
        return pod if statuses and statuses[0].get("ready") else None

    pod = eventually(ready, 120, "the operator pod Ready")
    kill_container(node, namespace, pod["metadata"]["name"])
    return pod["status"]["containerStatuses"][0]["restartCount"]


def operator_restarted(node, namespace: str, before: int) -> None:
    """Asserts the operator's container was restarted since ``before`` and waits until it is Ready."""
    eventually(lambda: (s := (operator_pod(node, namespace)["status"].get("containerStatuses") or [{}])[0])
               .get("restartCount", 0) > before and s.get("ready"), 180, "the killed operator Ready again")
