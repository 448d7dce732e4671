"""What every part of the manifest shares: its errors, the strict base of its models, and the
shapes of Kubernetes names and Secret or ConfigMap keys."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ManifestError(ValueError):
    """A manifest is unreadable or invalid; the message names each offending field
    by its path (``spec.tasksMax``) and says what was expected."""


class NotMounted(ManifestError):
    """A Secret, ConfigMap or one of their keys that a manifest references is not mounted."""


class KeysRefused(ValueError):
    """Raised by a validator of a mapping field to name each refused key in the field's path
    (``spec.spark.sparkConf.spark.authenticate: ...``), one line each."""

    def __init__(self, reasons: dict[str, str]) -> None:
        super().__init__("; ".join(f"{key}: {reason}" for key, reason in reasons.items()))
        self.reasons = reasons


class StrictModel(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


K8S_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
"""A Kubernetes object name (DNS subdomain, as RE2 and Python read it), e.g. of a Secret."""


MOUNTED_KEY = r"^\.?[-_a-zA-Z0-9][-._a-zA-Z0-9]*$"
"""A Secret or ConfigMap key as Kubernetes' ``IsConfigMapKey``: ``[-._a-zA-Z0-9]+``, not ``.``
or ``..`` and not starting with ``..``, so no path separator and no way out of the mount. In
a form both RE2 (the CRD's ``pattern``) and Python read the same."""


MOUNTED_KEY_RULE = "a Secret or ConfigMap key ([-._a-zA-Z0-9]+, not '.' or '..' nor starting with '..')"
"""What :data:`MOUNTED_KEY` asks, in words (read after "is not")."""
