"""Kafka Connect's REST API (4.x) on the driver's control port, for the connector it runs.

The same paths, documents, status codes and error messages as Apache Kafka Connect's
worker (``ConnectorsResource``, ``ConnectorPluginsResource``, ``RootResource``), so that
curl scripts, kcctl and Kafka UIs drive a Conveyor connector unchanged. A driver runs one
connector: ``GET /connectors`` lists it, and any other name answers as Connect answers for a
connector that does not exist.

On purpose different (see ``docs/kafka-connect-compat.md``):

* Creating and deleting connectors belongs to the ``Connector`` resource (``kubectl
  apply`` / ``kubectl delete``, or ``conveyor run`` / ``conveyor stop``): ``POST
  /connectors``, ``PUT /connectors/<other>/config`` and ``DELETE /connectors/<name>``
  answer 409 saying so.
* ``GET /`` gives Conveyor's version; ``commit`` is ``"unknown"``.
* ``PUT /connectors/<name>/topics/reset`` answers as a worker with
  ``topic.tracking.allow.reset=false``: topics are those the tasks hold now.
* Every endpoint but ``GET /health`` needs the admin token (:mod:`conveyor.control.auth`).

Each endpoint's work but ``GET /health``'s runs on a worker thread (see
:mod:`conveyor.runtime.rest.server`).
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from starlette.datastructures import QueryParams
from starlette.responses import Response

from conveyor.api import ConfigError
from conveyor.control.auth import Role
from conveyor.control.errors import OperationError
from conveyor.control.protocol import TaskState
from conveyor.manifest import ConnectorSpec, ConnectorState
from conveyor.runtime.config.settings import SinkSettings, SourceSettings, parse_source_settings
from conveyor.runtime.config.validation import PreflightError, connector_class, validate_config
from conveyor.runtime.herder.protocol import Herder
from conveyor.runtime.kafka.clients import bootstrap_servers, client_config
from conveyor.runtime.rest import admin_loggers
from conveyor.runtime.rest import connect_documents as docs
from conveyor.runtime.rest import connect_offsets as offsets
from conveyor.runtime.rest.live_config import apply_written_spec, mentions_reference

log = logging.getLogger(__name__)

#: Keys of a Connect configuration that are fields of ``spec``, not ``spec.config``.
_SPEC_KEYS = ("name", "connector.class", "tasks.max")
ADMIN = frozenset({Role.ADMIN})
OPEN: frozenset[Role] = frozenset()
CLUSTER_ID_TIMEOUT_S = 10.0
_cluster_ids: dict[str, str] = {}


def is_connect_path(path: str) -> bool:
    """Whether ``path`` belongs to Kafka Connect's API (whose errors follow Connect's, 500 for
    a malformed body included) rather than Conveyor's own."""
    return path == "/" or path.startswith(("/connectors", "/connector-plugins", "/admin/"))


def _no_content(status: HTTPStatus) -> Response:
    return Response(status_code=int(status))


def _check_connector(driver: Herder, p: dict[str, Any], message: str) -> str:
    """The connector named in the path; 404 with Connect's ``message`` (``{c}`` is the name)
    for any connector but the driver's."""
    name = p["connector"]
    if name != driver.name:
        raise OperationError(HTTPStatus.NOT_FOUND, message.format(c=name))
    return name


def _stopped(driver: Herder) -> bool:
    return driver.connector_state is TaskState.STOPPED


def _version(driver: Herder) -> str:
    if driver.connector is not None:
        return str(driver.connector.version())

    return docs.plugin_version(connector_class(driver.manifest.spec.connector_class)[0])


def _state_info(driver: Herder, status: dict[str, Any] | None = None) -> dict[str, Any]:
    info = docs.connector_state_info(status or driver.status(), _version(driver))
    if _stopped(driver):  # Connect's stopped connector has no tasks (KIP-875)
        info["tasks"] = []
    return info


def _config_of(driver: Herder) -> dict[str, str]:
    """The connector's configuration as written (references unresolved), as Connect keeps it."""
    spec = driver.written_spec
    return docs.connect_config(driver.name, spec.connector_class, spec.tasks_max, spec.config)


def _info(driver: Herder) -> dict[str, Any]:
    task_ids = [] if _stopped(driver) else sorted(driver.tasks)
    return docs.connector_info(driver.name, _config_of(driver), task_ids, driver.connector_type)


# ---------------------------------------------------------------------------------- worker


def _conveyor_version() -> str:
    try:
        return version("conveyor")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def _server_info(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    return HTTPStatus.OK, {"version": _conveyor_version(), "commit": "unknown",
                           "kafka_cluster_id": _cluster_id(driver)}


def _cluster_id(driver: Herder) -> str | None:
    """The Kafka cluster's id (``DescribeCluster``), asked once per bootstrap list."""
    from confluent_kafka.admin import AdminClient

    servers = bootstrap_servers(driver.kafka)
    if servers not in _cluster_ids:
        admin = AdminClient(client_config(driver.kafka))
        cluster = admin.describe_cluster(request_timeout=CLUSTER_ID_TIMEOUT_S).result(CLUSTER_ID_TIMEOUT_S)
        _cluster_ids[servers] = cluster.cluster_id
    return _cluster_ids[servers]


def _health(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    phase = driver.lifecycle.phase.value
    if phase == "RUNNING":
        return HTTPStatus.OK, {"status": "healthy",
                               "message": "Worker has completed startup and is ready to handle requests."}
    if phase in ("CREATED", "STARTING"):
        return HTTPStatus.SERVICE_UNAVAILABLE, {"status": "starting", "message": "Worker is still starting up."}
    return HTTPStatus.INTERNAL_SERVER_ERROR, {"status": "unhealthy", "message": "Worker is shutting down."}


# ---------------------------------------------------------------------------------- reads


def _connectors(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    expand = set(q.getlist("expand"))
    if not expand & {"status", "info"}:
        return HTTPStatus.OK, [driver.name]
    entry: dict[str, Any] = {}
    if "status" in expand:
        entry["status"] = _state_info(driver)
    if "info" in expand:
        entry["info"] = _info(driver)
    return HTTPStatus.OK, {driver.name: entry}


def _connector(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    _check_connector(driver, p, "Connector {c} not found")
    return HTTPStatus.OK, _info(driver)


def _config(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    _check_connector(driver, p, "Connector {c} not found")
    return HTTPStatus.OK, _config_of(driver)


def _status(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    _check_connector(driver, p, "No status found for connector {c}")
    return HTTPStatus.OK, _state_info(driver)


def _tasks(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    name = _check_connector(driver, p, "Connector {c} not found")
    if _stopped(driver) or driver.connector is None:
        return HTTPStatus.OK, []
    task_class = docs.class_name(driver.connector.task_class())
    configs = {task_id: _unresolved(driver, handle.config) for task_id, handle in driver.tasks.items()}
    return HTTPStatus.OK, docs.task_infos(name, configs, task_class)


def _unresolved(driver: Herder, task_config: dict[str, Any]) -> dict[str, Any]:
    """A task's configuration with the keys written as references in the connector's
    configuration shown as written (Kafka Connect's ``AbstractHerder.reverseTransform``)."""
    written = driver.written_spec.config
    return {k: written[k] if mentions_reference(written.get(k)) else v for k, v in task_config.items()}


def _task_status(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    name = _check_connector(driver, p, "No status found for task {c}-" + str(p["task_id"]))
    for entry in _state_info(driver)["tasks"]:
        if entry["id"] == p["task_id"]:
            return HTTPStatus.OK, entry
    raise OperationError(HTTPStatus.NOT_FOUND, f"No status found for task {name}-{p['task_id']}")


def _topics(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    name = _check_connector(driver, p, "Connector {c} not found")
    topics: set[str] = set()
    for entry in driver.status()["tasks"]:
        topics.update(tp.rpartition(":")[0] for tp in entry.get("consumed") or entry.get("committed") or ())
        topics.update(entry.get("topics_written") or ())
    return HTTPStatus.OK, {name: {"topics": sorted(topics)}}


def _topics_reset(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    _check_connector(driver, p, "Connector {c} not found")
    raise OperationError(HTTPStatus.FORBIDDEN, "Topic tracking reset is disabled.")


# ---------------------------------------------------------------------------------- state


def _pause(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> Response:
    _check_connector(driver, p, "Unknown connector {c}")
    driver.set_state(ConnectorState.PAUSED)
    return _no_content(HTTPStatus.ACCEPTED)


def _resume(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> Response:
    _check_connector(driver, p, "Unknown connector {c}")
    driver.set_state(ConnectorState.RUNNING)
    return _no_content(HTTPStatus.ACCEPTED)


def _stop(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> Response:
    _check_connector(driver, p, "Unknown connector {c}")
    driver.set_state(ConnectorState.STOPPED)
    return _no_content(HTTPStatus.NO_CONTENT)


def _flag(q: QueryParams, name: str) -> bool:
    # JAX-RS @QueryParam boolean: "true" (any case) is true, anything else false.
    return q.get(name, "false").lower() == "true"


def _restart(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any] | Response:
    include_tasks, only_failed = _flag(q, "includeTasks"), _flag(q, "onlyFailed")
    _check_connector(driver, p, "Unknown connector: {c}")
    if not (include_tasks or only_failed):
        driver.restart()
        return _no_content(HTTPStatus.NO_CONTENT)
    return HTTPStatus.ACCEPTED, _state_info(driver, driver.restart(include_tasks=include_tasks,
                                                                   only_failed=only_failed))


def _restart_task(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> Response:
    name = _check_connector(driver, p, "Unknown connector: {c}")
    if p["task_id"] not in driver.tasks:
        raise OperationError(HTTPStatus.NOT_FOUND, f"Unknown task: {name}-{p['task_id']}")
    driver.restart_task(p["task_id"])
    return _no_content(HTTPStatus.NO_CONTENT)


# ---------------------------------------------------------------------------------- config


def _refuse_lifecycle(name: str, action: str) -> OperationError:
    return OperationError(HTTPStatus.CONFLICT,
                          f"Conveyor runs one connector per driver: {action} connector {name} through its "
                          "Connector resource (kubectl apply / kubectl delete) or conveyor run / conveyor stop")


def _spec_from_connect(driver: Herder, name: str, config: dict[str, Any]) -> ConnectorSpec:
    """The driver's written spec with a Connect configuration in it: ``connector.class`` and
    ``tasks.max`` become ``spec.class`` / ``spec.tasksMax``, the other keys ``spec.config``."""
    given = config.get("name")
    if given is not None and given != name:
        raise OperationError(HTTPStatus.BAD_REQUEST,
                             f"Connector name configuration ({given}) doesn't match connector name in the URL ({name})")
    written = driver.written_spec
    update: dict[str, Any] = {"config": {k: v for k, v in config.items() if k not in _SPEC_KEYS}}
    if "connector.class" in config:
        update["connector_class"] = config["connector.class"]
    if "tasks.max" in config:
        try:
            update["tasks_max"] = int(config["tasks.max"])
        except (TypeError, ValueError):
            raise OperationError(HTTPStatus.BAD_REQUEST,
                                 f"Invalid value {config['tasks.max']} for configuration tasks.max: "
                                 "Not a number of type INT") from None
    return ConnectorSpec.model_validate(written.model_copy(update=update).model_dump(by_alias=True))


def _put_config(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    name = p["connector"]
    if name != driver.name:
        raise _refuse_lifecycle(name, "create")
    apply_written_spec(driver, _spec_from_connect(driver, name, body))
    return HTTPStatus.OK, _info(driver)


def _patch_config(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    """Connect's ``PATCH``: ``body`` merged into the written configuration (a ``null`` removes a
    key), never into resolved values; the references are resolved again for the connector."""
    name = _check_connector(driver, p, "Connector {c} not found")
    merged = {**_config_of(driver), **body}
    apply_written_spec(driver, _spec_from_connect(driver, name, {k: v for k, v in merged.items() if v is not None}))
    return HTTPStatus.OK, _info(driver)


def _create(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    raise _refuse_lifecycle(str((body or {}).get("name", "")), "create")


def _delete(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    name = _check_connector(driver, p, "Connector {c} not found")
    raise _refuse_lifecycle(name, "delete")


# ---------------------------------------------------------------------------------- plugins


def _plugins(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    connectors_only = q.get("connectorsOnly", "true").strip().lower() != "false"  # as Connect's @DefaultValue("true")
    return HTTPStatus.OK, docs.plugin_infos(connectors_only, _conveyor_version())


def _plugin(name: str) -> type:
    cls = docs.find_plugin(name)
    if cls is None:
        raise OperationError(HTTPStatus.NOT_FOUND, f"Unknown plugin {name}.")
    return cls


def _plugin_keys(cls: type) -> list[dict[str, Any]]:
    runtime = SinkSettings if docs.connector_type_of(cls) == "sink" else SourceSettings
    keys = docs.config_key_infos(runtime, "Common")
    if (model := getattr(cls, "config_model", None)) is not None:
        keys += docs.config_key_infos(model, cls.__name__)
    return keys


def _plugin_config(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    return HTTPStatus.OK, _plugin_keys(_plugin(p["plugin"]))


def _validate(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    named = body.get("connector.class")
    cls = docs.find_plugin(p["plugin"])
    if named is not None and (cls is None or docs.find_plugin(str(named)) is not cls):
        raise OperationError(HTTPStatus.BAD_REQUEST,
                             f"Included connector type {named} does not match request type {p['plugin']}")
    if cls is None:
        known = ", ".join(plugin["class"] for plugin in docs.plugin_infos())
        raise OperationError(HTTPStatus.INTERNAL_SERVER_ERROR,
                             f"Failed to find any class that implements Connector and which name matches "
                             f"{p['plugin']}, available connectors are: {known}")
    config = {k: v for k, v in body.items() if k not in _SPEC_KEYS}
    errors: dict[str, str] = {}
    try:
        validate_config(cls(), docs.connector_type_of(cls), config, str(body.get("name", "")))
    except PreflightError as exc:
        errors = dict(exc.errors or {})
    except ConfigError as exc:
        errors = dict(exc.errors)
    return HTTPStatus.OK, docs.config_infos(docs.class_name(cls), _plugin_keys(cls), body, errors)


# ---------------------------------------------------------------------------------- offsets (KIP-875)


def _offsets(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    name = _check_connector(driver, p, "Connector {c} not found")
    if driver.connector_type == "sink":
        return HTTPStatus.OK, {"offsets": offsets.list_sink_offsets(driver.kafka, name)}

    topic = parse_source_settings(driver.manifest.spec.config).offsets_storage_topic
    return HTTPStatus.OK, {"offsets": offsets.list_source_offsets(driver.kafka, name, topic)}


def _modify_offsets(driver: Herder, p: dict[str, Any], entries: list[Any] | None) -> tuple[HTTPStatus, Any]:
    """Alter (``entries``) or reset (``None``) the offsets of the stopped connector, holding the
    driver's operations lock so that no resume starts its tasks meanwhile."""

    name = _check_connector(driver, p, "Connector {c} not found")
    spec = driver.manifest.spec
    cls, connector_type = connector_class(spec.connector_class)
    config = {**spec.config, "name": name}
    namespace = driver.manifest.metadata.namespace
    with driver.operations:
        if not _stopped(driver):
            raise OperationError(HTTPStatus.BAD_REQUEST, offsets.not_stopped_message(name))
        if entries is None:
            message = offsets.reset_offsets(driver.kafka, cls, config, namespace)
        elif connector_type == "sink":
            message = offsets.alter_sink_offsets(driver.kafka, cls, config, offsets.parse_sink_offsets(entries))
        else:
            message = offsets.alter_source_offsets(driver.kafka, cls, config, namespace,
                                                   offsets.parse_source_offsets(entries))
    return HTTPStatus.OK, {"message": message}


def _alter_offsets(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    return _modify_offsets(driver, p, offsets.entries_of(body))


def _reset_offsets(driver: Herder, q: QueryParams, p: dict[str, Any], body: Any) -> tuple[HTTPStatus, Any]:
    return _modify_offsets(driver, p, None)


#: (method, path, call, reads a JSON body, roles allowed): the route table that
#: :func:`conveyor.runtime.rest.server.build_app` serves beside Conveyor's own.
CONNECT_ENDPOINTS: list[tuple[str, str, Any, bool, frozenset[Role]]] = [
    ("GET", "/", _server_info, False, ADMIN),
    ("GET", "/health", _health, False, OPEN),
    ("GET", "/connectors", _connectors, False, ADMIN),
    ("POST", "/connectors", _create, True, ADMIN),
    ("GET", "/connectors/{connector}", _connector, False, ADMIN),
    ("DELETE", "/connectors/{connector}", _delete, False, ADMIN),
    ("GET", "/connectors/{connector}/config", _config, False, ADMIN),
    ("PUT", "/connectors/{connector}/config", _put_config, True, ADMIN),
    ("PATCH", "/connectors/{connector}/config", _patch_config, True, ADMIN),
    ("GET", "/connectors/{connector}/status", _status, False, ADMIN),
    ("GET", "/connectors/{connector}/tasks", _tasks, False, ADMIN),
    ("GET", "/connectors/{connector}/tasks/{task_id:int}/status", _task_status, False, ADMIN),
    ("POST", "/connectors/{connector}/tasks/{task_id:int}/restart", _restart_task, False, ADMIN),
    ("GET", "/connectors/{connector}/topics", _topics, False, ADMIN),
    ("PUT", "/connectors/{connector}/topics/reset", _topics_reset, False, ADMIN),
    ("PUT", "/connectors/{connector}/pause", _pause, False, ADMIN),
    ("PUT", "/connectors/{connector}/resume", _resume, False, ADMIN),
    ("PUT", "/connectors/{connector}/stop", _stop, False, ADMIN),
    ("POST", "/connectors/{connector}/restart", _restart, False, ADMIN),
    ("GET", "/connectors/{connector}/offsets", _offsets, False, ADMIN),
    ("PATCH", "/connectors/{connector}/offsets", _alter_offsets, True, ADMIN),
    ("DELETE", "/connectors/{connector}/offsets", _reset_offsets, False, ADMIN),
    ("GET", "/connector-plugins", _plugins, False, ADMIN),
    ("GET", "/connector-plugins/{plugin}/config", _plugin_config, False, ADMIN),
    ("PUT", "/connector-plugins/{plugin}/config/validate", _validate, True, ADMIN),
    *admin_loggers.ENDPOINTS,
]
