"""Secrets and ConfigMaps as the pods see them (mounted under :func:`mount_root`), and the
references a manifest makes to them and to the environment: ``configFrom``,
``${secret:<name>:<key>}``, ``${configmap:<name>:<key>}`` and ``${env:NAME}``. A resolved value
is remembered for redaction (:mod:`conveyor.api.redaction`)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conveyor.api.redaction import remember_resolved
from conveyor.manifest.base import MOUNTED_KEY, MOUNTED_KEY_RULE, ManifestError, NotMounted

if TYPE_CHECKING:
    from conveyor.manifest import ConnectorSpec


ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


MOUNT_REF = re.compile(r"\$\{(secret|configmap):([^:}]+):([^}]+)\}")


def mount_root() -> Path:
    """Directory the pods see Secrets and ConfigMaps under (``$CONVEYOR_MOUNT_DIR``,
    default ``/etc/conveyor``): ``secrets/<name>/<key>`` and ``configmaps/<name>/<key>``."""
    return Path(os.environ.get("CONVEYOR_MOUNT_DIR", "/etc/conveyor"))


def mounted_file(root: Path, kind: str, name: str, key: str, field: str) -> Path:
    """The file of ``key`` in the Secret (``kind`` ``"secret"``) or ConfigMap (``"configmap"``)
    ``name`` mounted under ``root`` (``secrets/<name>/<key>``, ``configmaps/<name>/<key>``),
    after checking that ``key`` is a Kubernetes key and that the path, symlinks followed (the
    kubelet's ``..data`` links), lies inside that source's directory: a key is never a way to
    another file of the pod (issue 28, item 1).

    Returns:
        The path as mounted (not resolved, so that a rotated Secret is read anew).

    Raises:
        NotMounted: the file is not there (names ``field``).
        ManifestError: ``key`` is not a Secret or ConfigMap key, or leads outside the mount;
            names ``field``, never the file's content.
    """
    if not re.fullmatch(MOUNTED_KEY, key) or len(key) > 253:
        raise ManifestError(f"{field}: {key!r} is not {MOUNTED_KEY_RULE}")
    directory = root / ("secrets" if kind == "secret" else "configmaps") / name
    path = directory / key
    try:
        inside = path.resolve(strict=True).is_relative_to(directory.resolve(strict=True))
    except (OSError, RuntimeError):  # missing, or a symlink loop
        raise NotMounted(f"{field}: {path} is not mounted (is the Secret or ConfigMap missing?)") from None
    if not inside:
        raise ManifestError(f"{field}: key {key!r} of {kind} {name!r} leads outside its mount")
    if not path.is_file():
        raise NotMounted(f"{field}: {path} is not mounted (is the Secret or ConfigMap missing?)")
    return path


def mentions_mounts(config: Mapping[str, Any]) -> bool:
    return any(isinstance(v, str) and MOUNT_REF.search(v) for v in config.values())


def resolve_mounted_config(spec: ConnectorSpec, root: Path, source: str = "<manifest>") -> dict[str, Any]:
    """``spec.config`` with ``configFrom`` merged in (keys set in ``spec.config`` win) and
    ``${secret:<name>:<key>}`` / ``${configmap:<name>:<key>}`` replaced, reading the files
    the pods see under ``root`` (``secrets/<name>/<key>``, ``configmaps/<name>/<key>``).

    Raises:
        ManifestError: a source is not mounted, or a reference names a Secret or ConfigMap
            that ``configFrom`` does not list or a key it does not have (names the field).
    """
    merged: dict[str, Any] = {}
    for i, src in enumerate(spec.config_from):
        directory = src.directory(root)
        if not directory.is_dir():
            raise ManifestError(f"{source}: spec.configFrom[{i}]: {src.kind} {src.name!r} is not mounted at {directory}")
        for item in sorted(directory.iterdir()):
            if item.is_file() and not item.name.startswith("."):
                file = mounted_file(root, src.kind.lower(), src.name, item.name, f"spec.configFrom[{i}]")
                merged[src.prefix + item.name] = file.read_text()
                remember_resolved(merged[src.prefix + item.name], f"${{{src.kind.lower()}:{src.name}:{item.name}}}")
    merged.update(spec.config)
    listed = {("secret", s.name) for s in spec.config_from if s.secret_ref is not None}
    listed |= {("configmap", s.name) for s in spec.config_from if s.config_map_ref is not None}

    def substitute(key: str, value: Any) -> Any:
        if not isinstance(value, str):
            return value

        def read(match: re.Match[str]) -> str:
            kind, name, item = match.groups()
            if (kind, name) not in listed:
                raise ManifestError(f"{source}: spec.config.{key}: ${{{kind}:{name}:...}} needs {name!r} in spec.configFrom")
            try:
                path = mounted_file(root, kind, name, item, f"spec.config.{key}")
            except NotMounted:
                raise ManifestError(f"{source}: spec.config.{key}: {kind} {name!r} has no key {item!r}") from None
            except ManifestError as exc:
                raise ManifestError(f"{source}: {exc}") from None
            resolved = path.read_text()
            remember_resolved(resolved, match.group(0))
            return resolved

        return MOUNT_REF.sub(read, value)

    return {k: substitute(k, v) for k, v in merged.items()}


def substitute_env(data: Any, environ: Mapping[str, str], source: str = "<manifest>", path: str = "") -> Any:
    """Replace ``${env:NAME}`` in every string of ``data``.

    Raises:
        ManifestError: a referenced variable is not set.
    """
    if isinstance(data, dict):
        return {k: substitute_env(v, environ, source, f"{path}.{k}" if path else str(k)) for k, v in data.items()}
    if isinstance(data, list):
        return [substitute_env(v, environ, source, f"{path}[{i}]") for i, v in enumerate(data)]
    if isinstance(data, str) and "${env:" in data:

        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in environ:
                raise ManifestError(f"{source}: {path}: environment variable {name} is not set")
            remember_resolved(environ[name], match.group(0))
            return environ[name]

        return ENV_REF.sub(value, data)
    return data
