"""The operator's key, from which every connector's control credentials are derived.

The operator never reads a ``<name>-control`` Secret back (its account has no ``get`` on
Secrets, issue 28 item 4): it *computes* what it wrote there. Each value is an HMAC-SHA256
(RFC 2104) under this key of the value's purpose and the Connector's namespace, name, uid and
rotation (the ``conveyor.dev/rotate-control-secret`` annotation, empty when unset), so

- a Connector re-created under the same name gets new credentials (a new uid);
- deleting the Secret recreates the very same values (nothing to roll);
- a new rotation value, or a new key, gives new values, and :func:`version` changes, which
  the operator writes to ``status.controlSecretVersion`` and the driver pod template.

The key is 32 bytes or more, read once from the file ``CONVEYOR_OPERATOR_KEY_FILE`` names
(:attr:`OperatorSettings.key_file`; the Helm chart mounts its ``<release>-operator-key`` Secret). Without that file (an operator started
by hand or by a test) the key is random per process, so a restarted operator replaces every
control Secret it reconciles, once.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

KEY_FILE_ENV = "CONVEYOR_OPERATOR_KEY_FILE"
MIN_KEY_BYTES = 32


class OperatorKeyError(ValueError):
    """The key file is unreadable or shorter than :data:`MIN_KEY_BYTES`."""


@dataclass(frozen=True)
class ConnectorIdentity:
    """What a connector's credentials are derived from, all readable on its Connector object."""

    namespace: str
    name: str
    uid: str
    rotation: str = ""


class OperatorKey:
    """An HMAC key and the credentials derived from it. Immutable, thread-safe."""

    def __init__(self, key: bytes) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise OperatorKeyError(f"the operator key has {len(key)} bytes; at least {MIN_KEY_BYTES} are needed")
        self._key = key
        self.key_id = hashlib.sha256(b"conveyor.dev/key-id\0" + key).hexdigest()[:12]
        """A public fingerprint of the key (12 hex digits): it tells keys apart, reveals nothing."""

    @classmethod
    def load(cls, path: str) -> OperatorKey:
        """The key of the file ``path`` (surrounding whitespace stripped), or a random one when
        ``path`` is empty.

        Raises:
            OperatorKeyError: the file cannot be read or is too short.
        """
        if not path:
            log.warning("%s is unset: control credentials are derived from a random key of this process, "
                        "so the next operator replaces every control Secret once", KEY_FILE_ENV)
            return cls(secrets.token_bytes(MIN_KEY_BYTES))
        try:
            key = Path(path).read_bytes().strip()
        except OSError as exc:
            raise OperatorKeyError(f"{KEY_FILE_ENV}={path}: {exc.strerror}") from None
        return cls(key)

    def derive(self, purpose: str, who: ConnectorIdentity) -> str:
        """The value of ``purpose`` (a key of the control Secret, e.g. ``admin-token``) for
        ``who``: 43 URL-safe base64 characters (256 bits)."""
        message = f"conveyor.dev/control-secret\0{purpose}\0{who.namespace}\0{who.name}\0{who.uid}\0{who.rotation}"
        digest = hmac.new(self._key, message.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")

    def version(self, who: ConnectorIdentity) -> str:
        """A public fingerprint (16 hex digits) of the values :meth:`derive` gives ``who``: it
        changes with the key, the uid and the rotation, and reveals none of them."""
        return hashlib.sha256(f"{self.key_id}\0{who.uid}\0{who.rotation}".encode()).hexdigest()[:16]
