"""Where kopf keeps the Connector's last handled configuration (its "diff-base", what the next
change is compared with): ``status.lastHandledConfiguration``, not an annotation.

kopf writes it after each change it handled. In an annotation that is a write of the Connector of
its own, beside the reconcile's status write, and a watch event more for the operator to process;
in the status, kopf sends it in one request with the status the reconcile handler puts in its
``patch`` (kopf patches the status subresource apart from the rest, and skips the rest when empty).
A thousand Connectors created at once then cost a thousand writes fewer (issue 33).

Connectors last handled by an operator that kept it in the annotation
``kopf.conveyor.dev/last-handled-configuration`` are read from there until the next store, which
removes the annotation (one write of the Connector's metadata, once).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import kopf

STATUS_KEY = "lastHandledConfiguration"
FIELD = f"status.{STATUS_KEY}"
ANNOTATION_PREFIX = "kopf.conveyor.dev"
ANNOTATION_KEY = "last-handled-configuration"


class StatusDiffBase(kopf.StatusDiffBaseStorage):
    """kopf's :class:`kopf.StatusDiffBaseStorage` at :data:`FIELD`, falling back to the annotation
    :data:`ANNOTATION_PREFIX`/:data:`ANNOTATION_KEY` of earlier versions (read when the status has
    none, and never part of the compared essence); set as ``settings.persistence.diffbase_storage``
    at startup. kopf calls it on its event loop."""

    def __init__(self) -> None:
        super().__init__(field=FIELD)
        self._annotation = kopf.AnnotationsDiffBaseStorage(prefix=ANNOTATION_PREFIX, key=ANNOTATION_KEY)

    def build(self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None) -> kopf.BodyEssence:
        essence = super().build(body=body, extra_fields=extra_fields)
        return self._annotation.build(body=kopf.Body(dict(essence)), extra_fields=extra_fields)

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return super().fetch(body=body) or self._annotation.fetch(body=body)

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        super().store(body=body, patch=patch, essence=essence)
        for key in self._annotation.make_keys(ANNOTATION_KEY, body=body):
            if key in body.metadata.annotations:
                patch.metadata.annotations[key] = None
