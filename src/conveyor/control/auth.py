"""Who may call the driver's control API: two bearer tokens, and where they are kept.

Every request except ``GET /healthz``, ``GET /metrics`` and Kafka Connect's ``GET /health``
(KIP-1017) carries
``Authorization: Bearer <token>``:

* the **admin** token may call every endpoint. The operator, the ``conveyor`` commands and the
  driver pod's own ``preStop`` drain hold it.
* the **task** token may only post task reports (``POST /internal/tasks/<id>/sync``) and ask
  for a drain (``POST /drain``, the executor pods' ``preStop`` hook). Task runners get it in
  their :class:`~conveyor.control.protocol.TaskSpec`, executor pods in a mounted file.

A request without a valid token is answered 401 with ``WWW-Authenticate: Bearer``, and a valid
token that may not call the endpoint 403 (RFC 6750 §3.1). Tokens are compared in constant time
(:func:`hmac.compare_digest`).

Where the tokens come from:

* on Kubernetes, the operator's per-connector Secret ``<name>-control``, mounted as a
  directory (:data:`TOKEN_DIR_ENV`) with the files ``admin-token`` and ``task-token``;
* for a local ``conveyor run``, fresh ones (:meth:`ControlTokens.generate`). The admin token is
  written to a file only its user can read (:func:`write_local_token`), where the ``conveyor``
  commands on the same machine find it by the port (:func:`find_token`).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from urllib.parse import urlparse

TOKEN_DIR_ENV = "CONVEYOR_CONTROL_TOKEN_DIR"
"""A directory with ``admin-token`` and ``task-token``: ``conveyor run`` serves with them."""
TOKEN_FILE_ENV = "CONVEYOR_CONTROL_TOKEN_FILE"
"""A file with the token the ``conveyor`` commands send (``--token-file`` wins)."""
ADMIN_TOKEN_FILE = "admin-token"
TASK_TOKEN_FILE = "task-token"
SPARK_AUTH_SECRET_FILE = "spark-auth-secret"
"""Beside the tokens on Kubernetes: Spark's ``spark.authenticate`` secret (driver and executors)."""
AUTH_SCHEME = "Bearer"
REALM = "conveyor"


class ControlAuthError(RuntimeError):
    """The tokens cannot be read, or a token file cannot be written safely."""


class Role(str, Enum):
    """What a caller may do (see the module docstring)."""

    ADMIN = "admin"
    TASK = "task"


@dataclass(frozen=True)
class ControlTokens:
    """The two tokens of one driver. ``repr`` never shows them."""

    admin: str = field(repr=False)
    task: str = field(repr=False)

    def __post_init__(self) -> None:
        if not self.admin or not self.task or self.admin == self.task:
            raise ControlAuthError("the admin and task tokens must be non-empty and differ")

    @classmethod
    def generate(cls) -> ControlTokens:
        """Two fresh tokens of 256 random bits each (:func:`secrets.token_urlsafe`)."""
        return cls(admin=secrets.token_urlsafe(32), task=secrets.token_urlsafe(32))

    @classmethod
    def load_dir(cls, directory: str | Path) -> ControlTokens:
        """The tokens in ``directory``'s ``admin-token`` and ``task-token`` files (a mounted Secret).

        Raises:
            ControlAuthError: a file is missing, unreadable or empty (the message names the file,
                never its content).
        """
        return cls(admin=_read_token(Path(directory) / ADMIN_TOKEN_FILE),
                   task=_read_token(Path(directory) / TASK_TOKEN_FILE))

    def role_of(self, authorization: str | None) -> Role | None:
        """The role an ``Authorization`` header value grants, ``None`` for none.

        Both tokens are always compared, so the time taken says nothing about either."""
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != AUTH_SCHEME.lower():
            return None
        try:
            presented = given.strip().encode("ascii")
        except UnicodeEncodeError:
            return None
        is_admin = hmac.compare_digest(presented, self.admin.encode())
        is_task = hmac.compare_digest(presented, self.task.encode())
        return Role.ADMIN if is_admin else Role.TASK if is_task else None


def authorization_header(token: str | None) -> dict[str, str]:
    """``{"Authorization": "Bearer <token>"}``, or no header for ``None``."""
    return {"Authorization": f"{AUTH_SCHEME} {token}"} if token else {}


def _read_token(path: Path) -> str:
    try:
        token = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ControlAuthError(f"cannot read the control token {path}: {getattr(exc, 'strerror', None) or exc}") \
            from None
    if not token:
        raise ControlAuthError(f"the control token file {path} is empty")
    return token


def local_token_dir() -> Path:
    """``$XDG_RUNTIME_DIR/conveyor``, else ``~/.local/state/conveyor``."""
    base = os.environ.get("XDG_RUNTIME_DIR") or str(Path.home() / ".local" / "state")
    return Path(base) / "conveyor"


def local_token_file(port: int) -> Path:
    """Where ``conveyor run`` on control port ``port`` keeps its admin token."""
    return local_token_dir() / f"control-{port}.token"


def write_local_token(port: int, token: str) -> Path:
    """Write ``token`` to :func:`local_token_file` readable by this user only (directory 0700,
    file 0600, no symlink followed) and return its path.

    Raises:
        ControlAuthError: the directory or file cannot be made private.
    """
    directory = local_token_dir()
    path = local_token_file(port)
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if directory.stat().st_uid == os.getuid():
            directory.chmod(0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, token.encode("ascii"))
        finally:
            os.close(fd)
    except OSError as exc:
        raise ControlAuthError(f"cannot write the control token file {path}: {exc.strerror or exc}") from None
    return path


def remove_local_token(path: Path) -> None:
    """Remove a file :func:`write_local_token` wrote; a missing one is fine."""
    path.unlink(missing_ok=True)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def find_token(url: str, token_file: str | Path | None = None) -> str | None:
    """The token a ``conveyor`` command sends to the control API at ``url``.

    In order: ``token_file`` (``--token-file``), ``$CONVEYOR_CONTROL_TOKEN_FILE``, then, for a
    loopback ``url``, the file a local ``conveyor run`` wrote for its port. ``None`` when none
    applies (the driver then answers 401).

    Raises:
        ControlAuthError: a named file cannot be read or is empty.
    """
    named = token_file or os.environ.get(TOKEN_FILE_ENV)
    if named:
        return _read_token(Path(named))
    parsed = urlparse(url)
    if parsed.hostname and _is_loopback(parsed.hostname):
        local = local_token_file(parsed.port or 80)
        if local.is_file():
            return _read_token(local)
    return None
