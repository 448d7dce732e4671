"""The two tiny images every node needs, built without a registry or a daemon:

* ``localhost/pause:conveyor``: the pod sandbox image (containerd's ``sandbox_image``), from
  upstream's ``build/pause/linux/pause.c`` in the ``k8s.io/kubernetes`` module the node binaries
  are built from, compiled with ``gcc -static``;
* ``localhost/busybox:conveyor-65534``: Debian's ``busybox-static`` for test pods (shell,
  ``nslookup``, ``nc``, ``wget``), running as ``nobody`` (``USER 65534:65534``), so that pods of
  it pass ``runAsNonRoot`` in namespaces under Pod Security "restricted".

Both are written as one-layer ``docker save`` archives (what ``ctr images import`` takes) into
``<cache>/node/images`` and rebuilt only when their input changed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from conveyor.testing import _support
from conveyor.testing.errors import ComponentUnavailable

PAUSE_IMAGE = "localhost/pause:conveyor"
BUSYBOX_IMAGE = "localhost/busybox:conveyor-65534"
BUSYBOX_USER = "65534:65534"
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def write_docker_archive(rootfs: Path, ref: str, out: Path, cmd: list[str], user: str = "") -> Path:
    """Pack directory ``rootfs`` as a one-layer ``docker save`` archive tagged ``ref`` at ``out``
    (written to a temp file, then renamed). Files are owned by root in the image; containers
    run as ``user`` (``uid:gid``; empty: root)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        layer = Path(tmp) / "layer.tar"

        def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            return info

        with tarfile.open(layer, "w", format=tarfile.PAX_FORMAT) as t:
            for name in sorted(os.listdir(rootfs)):
                t.add(rootfs / name, arcname=name, filter=as_root)
        digest = hashlib.sha256()
        with open(layer, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        config = json.dumps({
            "architecture": "amd64", "os": "linux",
            "config": {"Env": [f"PATH={_PATH}"], "Cmd": cmd, "WorkingDir": "/", **({"User": user} if user else {})},
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{digest.hexdigest()}"]},
            "history": [{"created_by": "conveyor.testing.node_images"}],
        }).encode()
        config_name = f"{hashlib.sha256(config).hexdigest()}.json"
        manifest = json.dumps([{"Config": config_name, "RepoTags": [ref], "Layers": ["layer/layer.tar"]}]).encode()
        partial = Path(tmp) / "image.tar"
        with tarfile.open(partial, "w") as t:
            for name, data in ((config_name, config), ("manifest.json", manifest)):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o644
                t.addfile(info, io.BytesIO(data))
            t.add(layer, arcname="layer/layer.tar")
        os.replace(partial, out)
    return out


def _images_dir() -> Path:
    d = _support.cache_root() / "node" / "images"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _file_hash(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def pause_archive(pause_c: Path) -> Path:
    """The pause image's archive, compiled from ``pause_c`` on first use.

    Raises:
        ComponentUnavailable: ``gcc`` is missing or the compilation failed.
    """
    out = _images_dir() / f"pause-{_file_hash(pause_c)}.tar"
    if out.exists():
        return out
    gcc = shutil.which("gcc")
    if gcc is None:
        raise ComponentUnavailable("kubernetes-node", "gcc is needed to compile the pause image",
                                   hint="apt-get install gcc libc6-dev")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "rootfs"
        root.mkdir()
        built = subprocess.run([gcc, "-Os", "-static", "-DVERSION=v3.10-conveyor", "-o", str(root / "pause"),
                                str(pause_c)], capture_output=True, text=True, timeout=300, check=False)
        if built.returncode != 0:
            raise ComponentUnavailable("kubernetes-node", f"compiling {pause_c} failed",
                                       hint="apt-get install gcc libc6-dev", log_tail=built.stderr[-2000:])
        subprocess.run(["strip", str(root / "pause")], capture_output=True, check=False, timeout=60)
        return write_docker_archive(root, PAUSE_IMAGE, out, ["/pause"])


def busybox_archive(busybox: Path = Path("/bin/busybox")) -> Path:
    """The busybox image's archive (Debian's static busybox with one link per applet).

    Raises:
        ComponentUnavailable: ``busybox`` is not the static build (``apt-get install busybox-static``).
    """
    if not busybox.exists():
        raise ComponentUnavailable("kubernetes-node", f"{busybox} is missing", hint="apt-get install busybox-static")
    out = _images_dir() / f"busybox-{BUSYBOX_IMAGE.rpartition(':')[2]}-{_file_hash(busybox)}.tar"
    if out.exists():
        return out
    applets = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, timeout=30, check=False)
    if applets.returncode != 0 or not applets.stdout.strip():
        raise ComponentUnavailable("kubernetes-node", f"{busybox} --list failed: not the static busybox?",
                                   hint="apt-get install busybox-static")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "rootfs"
        for d in ("bin", "tmp", "etc", "proc", "sys", "dev"):
            (root / d).mkdir(parents=True)
        (root / "tmp").chmod(0o1777)
        shutil.copy2(busybox, root / "bin" / "busybox")
        for applet in applets.stdout.split():
            if applet != "busybox":
                (root / "bin" / applet).symlink_to("busybox")
        (root / "etc" / "passwd").write_text("root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n")
        (root / "etc" / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
        return write_docker_archive(root, BUSYBOX_IMAGE, out, ["/bin/sh"], user=BUSYBOX_USER)
