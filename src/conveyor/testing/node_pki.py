"""Credentials of the single-node cluster (:mod:`conveyor.testing.node`): a CA, the API server's
serving certificate, the ServiceAccount signing key pair, static bearer tokens and one
kubeconfig per component.

The layout is what a kubeadm cluster has, reduced to what a test node needs:

* ``ca.crt``/``ca.key``: a self-signed CA (RSA 2048, valid 7 days); the controller-manager
  publishes ``ca.crt`` as ``kube-root-ca.crt`` so in-cluster clients verify the API server.
* ``apiserver.crt``: signed by the CA, SANs ``127.0.0.1``, the node IP, the ``kubernetes``
  Service's ClusterIP and ``kubernetes.default.svc.cluster.local`` and its shorter forms.
* ``apiserver-kubelet-client.crt``: the API server's client certificate towards the kubelet
  (``O=system:masters``), which authenticates it by x509 and authorizes it by webhook.
* ``sa.key``/``sa.pub``: ServiceAccount token signing.
* ``tokens.csv`` for ``--token-auth-file``: the admin (``system:masters``), the kubelet
  (``system:node:<node>`` in ``system:nodes``, so the Node authorizer applies), the scheduler,
  the controller-manager and kube-proxy under their bootstrap RBAC user names.

Private keys and tokens are written mode 0600.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: (kubeconfig stem, user name, groups) of every static token.
COMPONENT_USERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("admin", "admin", ("system:masters",)),
    ("scheduler", "system:kube-scheduler", ()),
    ("controller-manager", "system:kube-controller-manager", ()),
    ("kube-proxy", "system:kube-proxy", ()),
)


@dataclass(frozen=True)
class NodePKI:
    """Paths written by :func:`write_pki`; ``kubeconfigs`` maps a stem (``admin``, ``kubelet``,
    ``scheduler``, ``controller-manager``, ``kube-proxy``) to its kubeconfig."""

    directory: Path
    ca_cert: Path
    ca_key: Path
    apiserver_cert: Path
    apiserver_key: Path
    kubelet_client_cert: Path
    kubelet_client_key: Path
    sa_key: Path
    sa_pub: Path
    tokens_csv: Path
    kubeconfigs: dict[str, Path]


def _write(path: Path, data: bytes, mode: int = 0o644) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def write_pki(directory: Path, *, node_name: str, node_ip: str, service_ip: str, server: str,
              more_nodes: Sequence[str] = ()) -> NodePKI:
    """Generate a fresh PKI under ``directory`` (created) for a node called ``node_name`` whose
    API server listens at ``server`` (``https://<node_ip>:<port>``) and whose ``kubernetes``
    Service has ClusterIP ``service_ip``. Each of ``more_nodes`` gets a kubelet token of its own
    too (kubeconfig ``kubelet-<name>``), so the API server can take that node in later.

    Raises:
        ImportError: the ``cryptography`` package is missing (a dev dependency).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    valid = (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=7))

    def key_pem(key: rsa.RSAPrivateKey) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                 serialization.NoEncryption())

    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "conveyor-node-ca")])
    ca_cert = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(valid[0]).not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    names = ["kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
             "localhost"]
    sans = [x509.DNSName(n) for n in names] + [
        x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", node_ip, service_ip)
    ]
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name).public_key(server_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(valid[0]).not_valid_after(valid[1])
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    client_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    client_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                                 x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver-kubelet-client")]))
        .issuer_name(ca_name).public_key(client_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(valid[0]).not_valid_after(valid[1])
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    d = directory
    pki = NodePKI(
        directory=d,
        ca_cert=_write(d / "ca.crt", ca_cert.public_bytes(serialization.Encoding.PEM)),
        ca_key=_write(d / "ca.key", key_pem(ca_key), 0o600),
        apiserver_cert=_write(d / "apiserver.crt", server_cert.public_bytes(serialization.Encoding.PEM)),
        apiserver_key=_write(d / "apiserver.key", key_pem(server_key), 0o600),
        kubelet_client_cert=_write(d / "apiserver-kubelet-client.crt",
                                   client_cert.public_bytes(serialization.Encoding.PEM)),
        kubelet_client_key=_write(d / "apiserver-kubelet-client.key", key_pem(client_key), 0o600),
        sa_key=_write(d / "sa.key", key_pem(sa_key), 0o600),
        sa_pub=_write(d / "sa.pub", sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)),
        tokens_csv=d / "tokens.csv",
        kubeconfigs={},
    )
    users = [*COMPONENT_USERS, ("kubelet", f"system:node:{node_name}", ("system:nodes",)),
             *((f"kubelet-{name}", f"system:node:{name}", ("system:nodes",)) for name in more_nodes)]
    rows = []
    for stem, user, groups in users:
        token = secrets.token_hex(16)
        rows.append(",".join([token, user, user, *groups]) if not groups
                    else f'{token},{user},{user},"{",".join(groups)}"')
        config = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "conveyor-node", "cluster": {"server": server,
                                                               "certificate-authority": str(pki.ca_cert)}}],
            "users": [{"name": stem, "user": {"token": token}}],
            "contexts": [{"name": stem, "context": {"cluster": "conveyor-node", "user": stem}}],
            "current-context": stem,
        }
        pki.kubeconfigs[stem] = _write(d / f"{stem}.kubeconfig", json.dumps(config, indent=2).encode(), 0o600)
    _write(pki.tokens_csv, ("\n".join(rows) + "\n").encode(), 0o600)
    return pki
