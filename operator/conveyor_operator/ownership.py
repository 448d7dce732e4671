"""Owner references: whether the operator made an object for a given owner (its ``controller``
reference), as the Kubernetes garbage collector and controllers read them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from conveyor.manifest import API_VERSION, KIND


def controller_reference(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The owner reference with ``controller: true`` of ``obj``, or None (the API server allows at
    most one)."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((ref for ref in refs if ref.get("controller")), None)


def controlled_by(obj: Mapping[str, Any], group: str, kind: str, owner: Mapping[str, Any]) -> bool:
    """Whether ``obj``'s controller is ``owner``, an object of API group ``group`` (``""`` for
    core) and ``kind``: same uid and name, and both in the same namespace (owner references are
    namespace-local). ``owner`` needs ``metadata.name``, ``namespace`` and ``uid``."""
    ref = controller_reference(obj)
    meta, owner_meta = obj.get("metadata") or {}, owner.get("metadata") or {}
    api_version = (ref or {}).get("apiVersion", "")
    ref_group = api_version.split("/")[0] if "/" in api_version else ""
    return (ref is not None and ref_group == group and ref.get("kind") == kind
            and bool(ref.get("uid")) and ref.get("uid") == owner_meta.get("uid")
            and ref.get("name") == owner_meta.get("name") and meta.get("namespace") == owner_meta.get("namespace"))


def owner_reference(name: str, uid: str) -> dict[str, Any]:
    """The controller reference of the Connector ``name`` (``uid``) on an object it owns: the
    garbage collector deletes the object with the Connector, which waits for it in foreground
    deletion."""
    return {"apiVersion": API_VERSION, "kind": KIND, "name": name, "uid": uid,
            "controller": True, "blockOwnerDeletion": True}
