"""Spark's volume properties, ``spark.kubernetes.{driver,executor}.volumes.<type>.<name>.<property>``
(Spark's "Running on Kubernetes" §Using Kubernetes Volumes), read from ``spec.spark.sparkConf``.

Spark mounts the executor volumes itself. The driver pod is the operator's in client mode, so
Spark ignores the driver ones there; the operator renders them into the driver pod instead, so
that one set of Spark properties gives the driver and its executors the same storage (say the
directory an archive sink writes to).

Properties, as Spark's:

``mount.path`` (required)
    where the volume appears in the container.
``mount.readOnly`` (``true`` | ``false``, default false), ``mount.subPath``
    as a ``volumeMount``'s ``readOnly`` and ``subPath``.
``options.<option>``
    the volume source's fields: ``emptyDir``: ``medium``, ``sizeLimit``;
    ``persistentVolumeClaim``: ``claimName`` (required; Spark's ``OnDemand`` claims are for
    executors only), ``readOnly``.

Spark's other two types, ``hostPath`` and ``nfs``, are refused: Conveyor's pods run under Pod
Security Standards "restricted", whose volume types are configMap, csi, downwardAPI, emptyDir,
ephemeral, persistentVolumeClaim, projected and secret. A host directory or an NFS export
reaches the pods as a PersistentVolume (of type ``hostPath``, ``local`` or ``nfs``, made by an
administrator) bound to a claim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

VOLUME_TYPES = {
    "emptyDir": {"required": (), "optional": ("medium", "sizeLimit")},
    "persistentVolumeClaim": {"required": ("claimName",), "optional": ("readOnly",)},
}
#: Spark's volume types Conveyor refuses (Pod Security Standards "restricted" does not admit them).
REFUSED_TYPES = ("hostPath", "nfs")
_MOUNT_PROPERTIES = ("mount.path", "mount.readOnly", "mount.subPath")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_BOOLEANS = {"true": True, "false": False}
#: Volume names the operator's pods (``tmp``, the manifest, Secrets, ConfigMaps, the executor
#: template) and Spark (``spark-local-dir-1``, ``spark-conf-volume-...``) already use.
RESERVED_NAMES = ("tmp", "connector", "executor-template")
RESERVED_PREFIXES = ("secret-", "configmap-", "spark-")


@dataclass(frozen=True)
class SparkVolume:
    """One volume of ``spark.kubernetes.<role>.volumes.<type>.<name>.*``."""

    type: str
    name: str
    mount_path: str
    read_only: bool = False
    sub_path: str | None = None
    options: dict[str, str] = field(default_factory=dict)

    def volume(self) -> dict[str, Any]:
        """The pod's ``volumes`` entry."""
        source: dict[str, Any] = dict(self.options)
        if "readOnly" in source:
            source["readOnly"] = _BOOLEANS[source["readOnly"].lower()]
        return {"name": self.name, self.type: source}

    def volume_mount(self) -> dict[str, Any]:
        """The container's ``volumeMounts`` entry."""
        mount: dict[str, Any] = {"name": self.name, "mountPath": self.mount_path}
        if self.read_only:
            mount["readOnly"] = True
        if self.sub_path:
            mount["subPath"] = self.sub_path
        return mount


def volumes(spark_conf: dict[str, str], role: str) -> list[SparkVolume]:
    """The volumes ``spark_conf`` gives ``role`` (``"driver"`` or ``"executor"``), in name order.

    Raises:
        ValueError: a malformed property; the message names the property and what is expected
            (a type of :data:`REFUSED_TYPES`, an unknown volume type or property, a missing ``mount.path`` or required option,
            a name that is not a DNS label or is reserved (:data:`RESERVED_NAMES`,
            :data:`RESERVED_PREFIXES`), a non-boolean
            ``readOnly``, ``claimName=OnDemand`` for the driver).
    """
    prefix = f"spark.kubernetes.{role}.volumes."
    grouped: dict[tuple[str, str], dict[str, str]] = {}
    for key, value in spark_conf.items():
        if not key.startswith(prefix):
            continue
        type_, _, rest = key[len(prefix):].partition(".")
        name, _, prop = rest.partition(".")
        if type_ in REFUSED_TYPES:
            raise ValueError(f"{key}: {type_} volumes are refused: the pods run under Pod Security Standards "
                             "'restricted', which does not admit them; mount the directory as a "
                             "persistentVolumeClaim (of a PersistentVolume of that type)")
        if type_ not in VOLUME_TYPES:
            raise ValueError(f"{key}: volume type {type_!r} is not one of {', '.join(VOLUME_TYPES)}")
        if not _DNS_LABEL.match(name):
            raise ValueError(f"{key}: volume name {name!r} must be a DNS label (lower case, digits, '-')")
        if name in RESERVED_NAMES or name.startswith(RESERVED_PREFIXES):
            raise ValueError(f"{key}: volume name {name!r} is reserved (taken: {', '.join(RESERVED_NAMES)}, "
                             f"{'*, '.join(RESERVED_PREFIXES)}*)")
        if prop not in _MOUNT_PROPERTIES and not prop.startswith("options."):
            raise ValueError(f"{key}: unknown property {prop!r} (expected {', '.join(_MOUNT_PROPERTIES)} "
                             "or options.<option>)")
        grouped.setdefault((type_, name), {})[prop] = value
    return [_volume(prefix, type_, name, props) for (type_, name), props in sorted(grouped.items(),
                                                                                   key=lambda item: item[0][1])]


def _volume(prefix: str, type_: str, name: str, props: dict[str, str]) -> SparkVolume:
    where = f"{prefix}{type_}.{name}"
    if not props.get("mount.path", "").startswith("/"):
        raise ValueError(f"{where}.mount.path: an absolute path is required")
    read_only = props.get("mount.readOnly", "false").lower()
    options = {k.removeprefix("options."): v for k, v in props.items() if k.startswith("options.")}
    allowed = VOLUME_TYPES[type_]
    for option in options:
        if option not in allowed["required"] + allowed["optional"]:
            raise ValueError(f"{where}.options.{option}: not an option of {type_} "
                             f"(known: {', '.join(allowed['required'] + allowed['optional'])})")
    for option in allowed["required"]:
        if not options.get(option):
            raise ValueError(f"{where}.options.{option}: required for a {type_} volume")
    for flag in (read_only, options.get("readOnly", "false").lower()):
        if flag not in _BOOLEANS:
            raise ValueError(f"{where}: readOnly must be true or false, not {flag!r}")
    if type_ == "persistentVolumeClaim" and options["claimName"] == "OnDemand" and ".driver." in prefix:
        raise ValueError(f"{where}.options.claimName: OnDemand claims are Spark's, for executors; "
                         "give the driver an existing PersistentVolumeClaim")
    return SparkVolume(type_, name, props["mount.path"], _BOOLEANS[read_only], props.get("mount.subPath"), options)
