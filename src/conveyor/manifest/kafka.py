"""``spec.kafka``: the connector's Kafka cluster, its TLS and SASL settings, and the librdkafka
properties they become (with the Secrets they name read from their mounts)."""

from __future__ import annotations

import enum
import re
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from conveyor.api.redaction import remember_resolved
from conveyor.manifest import mounts
from conveyor.manifest.base import K8S_NAME, MOUNTED_KEY, MOUNTED_KEY_RULE, StrictModel
from conveyor.manifest.mounts import mounted_file

CODE_LOADING_CLIENT_PROPERTIES = ("plugin.library.paths", "ssl.engine.location", "ssl.providers",
                                  "sasl.kerberos.kinit.cmd")
"""librdkafka properties (CONFIGURATION.md) whose value is a library to load or a command to run."""


CODE_LOADING_REASON = "librdkafka's {property} would load code or run a command in the pods"
"""Why a ``spec.config`` key ending in one of :data:`CODE_LOADING_CLIENT_PROPERTIES` is refused."""


class SecretKeySelector(StrictModel):
    """One key of a Secret in the connector's namespace, as Kubernetes' ``secretKeyRef``."""

    name: str = Field(min_length=1, max_length=253, pattern=K8S_NAME, description="Name of the Secret.")
    key: str = Field(min_length=1, max_length=253, json_schema_extra={"pattern": MOUNTED_KEY},
                     description="Key within the Secret: [-._a-zA-Z0-9]+, not '.' or '..' nor starting with '..'.")

    @field_validator("key")
    @classmethod
    def _check_key(cls, key: str) -> str:
        if not re.fullmatch(MOUNTED_KEY, key):
            raise ValueError(f"{key!r} is not {MOUNTED_KEY_RULE}")
        return key

    def mounted_file(self, mount_root: Path, field: str) -> Path:
        """Where the driver and executor pods see this key (Secrets are mounted as files),
        checked by :func:`mounted_file`.

        Raises:
            ManifestError: see :func:`mounted_file` (names ``field``).
        """
        return mounted_file(mount_root, "secret", self.name, self.key, field)


class KafkaTlsSpec(StrictModel):
    """TLS to the brokers (librdkafka ``security.protocol`` SSL or SASL_SSL)."""

    trusted_certificate: SecretKeySelector | None = Field(
        None, alias="trustedCertificate",
        description="PEM CA certificate(s) the brokers' certificates are checked against (ssl.ca.pem); "
        "unset uses the image's system trust store.",
    )
    certificate: SecretKeySelector | None = Field(
        None, description="PEM client certificate for mutual TLS (ssl.certificate.pem); needs key."
    )
    key: SecretKeySelector | None = Field(
        None, description="PEM private key of the client certificate (ssl.key.pem); needs certificate."
    )

    def model_post_init(self, __context: Any) -> None:
        if (self.certificate is None) != (self.key is None):
            raise ValueError("spec.kafka.tls: certificate and key must be set together")


class SaslMechanism(str, enum.Enum):
    """SASL mechanisms with a username and password, as librdkafka's ``sasl.mechanism``."""

    PLAIN = "plain"
    SCRAM_SHA_256 = "scram-sha-256"
    SCRAM_SHA_512 = "scram-sha-512"


class KafkaAuthenticationSpec(StrictModel):
    """SASL authentication with a username and a password kept in a Secret."""

    type: SaslMechanism = Field(description="SASL mechanism: plain, scram-sha-256 or scram-sha-512.")
    username: str = Field(min_length=1, description="SASL username (sasl.username).")
    password_secret: SecretKeySelector = Field(
        alias="passwordSecret", description="Secret key holding the SASL password (sasl.password)."
    )


class KafkaSpec(StrictModel):
    """Kafka cluster and how to authenticate to it."""

    bootstrap_servers: str = Field(
        alias="bootstrapServers",
        min_length=1,
        description="Comma-separated host:port list of the Kafka brokers.",
    )
    tls: KafkaTlsSpec | None = Field(None, description="TLS to the brokers; unset means plaintext.")
    authentication: KafkaAuthenticationSpec | None = Field(
        None, description="SASL authentication; unset means none."
    )

    def secret_refs(self) -> list[SecretKeySelector]:
        """Every Secret key this spec reads (the operator mounts them into the pods)."""
        refs = []
        if self.tls is not None:
            refs += [r for r in (self.tls.trusted_certificate, self.tls.certificate, self.tls.key) if r is not None]
        if self.authentication is not None:
            refs.append(self.authentication.password_secret)
        return refs

    def client_properties(self, mount_root: Path | None = None) -> dict[str, str]:
        """librdkafka properties for every client the runtime creates: ``bootstrap.servers``
        plus TLS and SASL settings read from the mounted Secrets under ``mount_root``
        (default :func:`mount_root`).

        TLS material goes in as PEM text (``ssl.ca.pem``, ``ssl.certificate.pem``,
        ``ssl.key.pem``), not file paths, as the SASL password goes in as text: the driver reads
        the Secrets and its clients on the executors get the values over Spark's encrypted RPC,
        so executor pods mount no Secret but the connector's ``<name>-control`` (issue 28, item 3:
        a driver may only create executors that mount that one).

        Raises:
            ManifestError: a referenced Secret key is not mounted (names the field).
        """
        root = mount_root or mounts.mount_root()
        props = {"bootstrap.servers": self.bootstrap_servers}
        tls, sasl = self.tls, self.authentication
        if tls is None and sasl is None:
            return props
        props["security.protocol"] = {(True, False): "SSL", (True, True): "SASL_SSL"}.get(
            (tls is not None, sasl is not None), "SASL_PLAINTEXT")
        if tls is not None:
            for prop, ref, field in (("ssl.ca.pem", tls.trusted_certificate, "trustedCertificate"),
                                     ("ssl.certificate.pem", tls.certificate, "certificate"),
                                     ("ssl.key.pem", tls.key, "key")):
                if ref is not None:
                    props[prop] = ref.mounted_file(root, f"spec.kafka.tls.{field}").read_text()
            if "ssl.key.pem" in props:
                remember_resolved(props["ssl.key.pem"], "spec.kafka.tls.key")
        if sasl is not None:
            props["sasl.mechanism"] = sasl.type.value.upper()
            props["sasl.username"] = sasl.username
            password = sasl.password_secret.mounted_file(root, "spec.kafka.authentication.passwordSecret")
            props["sasl.password"] = password.read_text().strip()
            remember_resolved(props["sasl.password"], "spec.kafka.authentication.passwordSecret")
        return props
