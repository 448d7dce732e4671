"""The project's container images, built from its own ``Dockerfile`` on this machine, no registry.

No container registry is reachable where the end-to-end tests run, so ``python:3.11-slim-bookworm``
cannot be pulled: :func:`debian_base` bootstraps a Debian 12 base from Debian packages instead
(``debootstrap --variant=minbase``, python3 and python3-venv), and :func:`build_images` builds the
Dockerfile's targets on it with ``buildah`` (``--build-arg BASE_IMAGE=...``), then writes each as a
``docker-archive`` tarball that ``ctr -n k8s.io images import`` takes. This needs root, ``buildah``
and ``debootstrap`` (``apt-get install buildah debootstrap``), and deb.debian.org and PyPI when
something has to be built.

Typical use::

    from conveyor.testing.images import build_images

    images = build_images()                     # {"runtime": BuiltImage, "operator": BuiltImage}
    runtime = images["runtime"]
    runtime.ref                                 # "localhost/conveyor:3f2a9c0d81be"
    runtime.archive                             # <cache>/images/runtime-3f2a9c0d81be.tar
    # ctr -n k8s.io images import <archive>, then helm install ... --set
    #   runtimeImage.repository=<runtime.repository>,runtimeImage.tag=<runtime.tag>

Tags are content hashes: of the Dockerfile, ``.dockerignore``, every file of the build context
(``.dockerignore`` applied, so ``__pycache__`` never counts) and the base image's id. A changed
source tree gives new tags; an unchanged one returns the archives already built (``built=False``)
after hashing the context, well under a second. Everything lives under
``${CONVEYOR_CACHE_DIR:-~/.cache/conveyor}/images``: the base's rootfs tarball, buildah's storage
(:func:`storage_driver`) and its pip cache (the wheel built from pyspark's sdist), one archive per
target (older ones are deleted, and images no longer tagged are pruned from the storage) and a
log per build. A cold build takes about 3 minutes, a rebuild after a source change about 40 s;
progress lines go to the terminal.

Failures raise :class:`~conveyor.testing.errors.ComponentUnavailable` (component ``"images"``)
naming what is missing or which step failed, with the tail of that step's log.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from conveyor.testing import _support
from conveyor.testing.errors import ComponentUnavailable

__all__ = ["BaseImage", "BuiltImage", "build_images", "context_files", "debian_base", "images_dir", "source_hash",
           "storage_driver"]

COMPONENT = "images"
#: Repository of each Dockerfile target's image.
REPOSITORIES = {"runtime": "localhost/conveyor", "operator": "localhost/conveyor-operator"}
BASE_REPOSITORY = "localhost/conveyor-base"
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
#: python:3.11-slim-bookworm has netbase and tzdata as well; the images should not notice the swap.
DEBIAN_PACKAGES = ("python3", "python3-venv", "ca-certificates", "netbase", "tzdata")
#: The CA bundle pip uses inside builds: a copy in a directory mounted read-only on the (empty)
#: /mnt of the build's containers, so not even an empty mount point stays in the image.
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
#: Bumped when the build recipe below changes in a way the hashed inputs do not show.
_RECIPE = "1"
_HINT = "apt-get install buildah debootstrap (as root)"
ENV_DRIVER = "CONVEYOR_BUILDAH_DRIVER"
_REPO = Path(__file__).resolve().parents[3]  # src/conveyor/testing/images.py -> the checkout
_SOURCES = "".join(f"deb {DEBIAN_MIRROR}{s} {DEBIAN_SUITE}{suite} main\n"
                   for s, suite in (("", ""), ("", "-updates"), ("-security", "-security")))


@dataclass(frozen=True)
class BaseImage:
    """The Debian base in buildah's storage under the cache (``built``: committed by this call)."""

    ref: str
    image_id: str
    built: bool


@dataclass(frozen=True)
class BuiltImage:
    """A Dockerfile target in ``archive`` (docker-archive for ``ctr -n k8s.io images import``,
    named ``ref`` inside: ``localhost/conveyor:<hash12>``, ``localhost/conveyor-operator:<hash12>``);
    ``built`` is False when it came from the cache."""

    ref: str
    archive: Path
    size_bytes: int
    built: bool

    @property
    def repository(self) -> str:
        return self.ref.rpartition(":")[0]

    @property
    def tag(self) -> str:
        return self.ref.rpartition(":")[2]


def images_dir() -> Path:
    """``<cache>/images`` (created if missing)."""
    path = _support.cache_root() / "images"
    path.mkdir(parents=True, exist_ok=True)
    return path


# --------------------------------------------------------------------------------------------
# what goes into an image: the build context and its hash


def _ignore_patterns(context: Path) -> list[tuple[bool, re.Pattern[str], str]]:
    """``.dockerignore`` as (negated, regex, cleaned pattern), in file order."""
    try:
        lines = (context / ".dockerignore").read_text().splitlines()
    except FileNotFoundError:
        return []
    patterns = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = os.path.normpath(line[1:].strip() if negated else line).lstrip("/")
        patterns.append((negated, re.compile(_glob_regex(pattern) + r"\Z"), pattern))
    return patterns


def _glob_regex(pattern: str) -> str:
    """Go's filepath.Match syntax plus ``**`` (any number of directories), as a regex."""
    regex, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            regex, i = regex + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            regex, i = regex + ".*", i + 2
        elif pattern[i] == "[" and "]" in pattern[i + 2:]:  # a class: [abc], [a-z], [^a]
            end = pattern.index("]", i + 2)
            regex, i = regex + "[" + pattern[i + 1:end].replace("\\", "\\\\") + "]", end + 1
        else:
            regex += {"*": "[^/]*", "?": "[^/]"}.get(pattern[i], re.escape(pattern[i]))
            i += 1
    return regex


def _excluded(rel: str, patterns: list[tuple[bool, re.Pattern[str], str]]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents wins."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for negated, regex, _ in patterns:
        if any(regex.match(p) for p in prefixes):
            excluded = not negated
    return excluded


def context_files(context: Path) -> list[str]:
    """Paths (relative, sorted) of the files a build of ``context`` sends, ``.dockerignore``
    applied the way Docker does (an excluded directory is not entered unless a ``!`` pattern
    names something under it). Symbolic links count as files."""
    patterns = _ignore_patterns(context)
    negations = [p for negated, _, p in patterns if negated]
    files: list[str] = []
    for dirpath, dirnames, filenames in os.walk(context):
        reldir = os.path.relpath(dirpath, context)
        reldir = "" if reldir == "." else reldir + "/"
        keep = []
        for d in sorted(dirnames):
            rel = reldir + d
            if os.path.islink(os.path.join(dirpath, d)):
                filenames.append(d)
            elif not _excluded(rel, patterns) or any((n + "/").startswith(rel + "/") for n in negations):
                keep.append(d)
        dirnames[:] = keep
        files.extend(reldir + f for f in filenames if not _excluded(reldir + f, patterns))
    return sorted(files)


def source_hash(context: Path, base_id: str) -> str:
    """sha256 (hex) of what an image built from ``context`` on the base ``base_id`` contains:
    the Dockerfile, ``.dockerignore``, every context file's path, executable bit and content
    (a link's target), the base image id and the build recipe's version."""
    h = hashlib.sha256(f"recipe {_RECIPE}\nbase {base_id}\n".encode())
    for rel in sorted({"Dockerfile", ".dockerignore", *context_files(context)}):
        path = context / rel
        if path.is_symlink():
            kind, data = "link", os.readlink(path).encode()
        elif path.is_file():
            kind, data = ("exec" if os.access(path, os.X_OK) else "file"), path.read_bytes()
        else:
            kind, data = "missing", b""
        h.update(f"{rel}\0{kind}\0{hashlib.sha256(data).hexdigest()}\n".encode())
    return h.hexdigest()


# --------------------------------------------------------------------------------------------
# running buildah and friends


def _progress(message: str) -> None:
    print(f"conveyor.testing: {message}", file=sys.__stderr__ or sys.stderr, flush=True)


def _require(*tools: str) -> None:
    if os.geteuid() != 0:
        raise ComponentUnavailable(COMPONENT, "building images needs root (debootstrap, buildah with chroot "
                                   "isolation)", hint="run the tests as root")
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        raise ComponentUnavailable(COMPONENT, f"{' and '.join(missing)} not installed", hint=_HINT)


def storage_driver() -> str:
    """buildah's storage driver: ``$CONVEYOR_BUILDAH_DRIVER``, else ``overlay`` where the kernel
    has it, else ``vfs`` (which copies the whole filesystem for every layer: a rebuild of the
    runtime image after a source change takes 100 s instead of 25 s, and 2.5 times the disk)."""
    with contextlib.suppress(OSError):
        if re.search(r"\soverlay$", Path("/proc/filesystems").read_text(), re.MULTILINE):
            return (os.environ.get(ENV_DRIVER) or "").strip() or "overlay"
    return (os.environ.get(ENV_DRIVER) or "").strip() or "vfs"


def _buildah(*args: str) -> list[str]:
    root, driver = images_dir(), storage_driver()
    return ["buildah", "--root", str(root / f"storage-{driver}"), "--runroot", str(root / f"runroot-{driver}"),
            "--storage-driver", driver, *args]


def _env() -> dict[str, str]:
    tmp = images_dir() / "tmp"  # buildah's temp files and its cache mounts (buildah-cache/<id>)
    tmp.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp), "BUILDAH_ISOLATION": "chroot", "DEBIAN_FRONTEND": "noninteractive"}


def _run(cmd: Sequence[str], log: Path, what: str, *, timeout: float = 3600, capture: bool = False) -> str:
    """Run ``cmd`` with its output appended to ``log`` as it comes (stdout is returned instead
    with ``capture``). Raises ComponentUnavailable (``what`` failed, with the log's tail) when
    it fails or times out."""
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(cmd)}\n".encode())
        out.flush()
        try:
            result = subprocess.run(list(cmd), stdout=subprocess.PIPE if capture else out, stderr=out, env=_env(),
                                    timeout=timeout, check=False, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise ComponentUnavailable(COMPONENT, f"{what} did not finish within {timeout:.0f}s (log {log})",
                                       log_tail=_support.tail(log)) from None
    if result.returncode != 0:
        hint = _HINT if result.returncode == 127 else ""
        if cmd[0] == "buildah" and storage_driver() == "overlay":
            hint = f"if overlay mounts fail on this machine, export {ENV_DRIVER}=vfs (slower, more disk)"
        raise ComponentUnavailable(COMPONENT, f"{what} failed (exit {result.returncode}; log {log})", hint=hint,
                                   log_tail=_support.tail(log))
    return (result.stdout or b"").decode("utf-8", "replace")


def _quiet(cmd: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` for its output; a failure is only logged (a missing image is an answer)."""
    result = subprocess.run(list(cmd), capture_output=True, text=True, env=_env(), timeout=600, check=False,
                            stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        _support.log.info("%s: exit %s: %s", " ".join(cmd[-3:]), result.returncode, result.stderr.strip()[-500:])
    return result


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """One builder at a time per cache (buildah's storage, the archives, the pruning)."""
    with open(images_dir() / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _progress("waiting for another process building images in the same cache ...")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _log(name: str) -> Path:
    logs = images_dir() / "logs"
    logs.mkdir(exist_ok=True)
    path = logs / f"{name}.log"
    path.write_text(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {name}\n")
    return path


# --------------------------------------------------------------------------------------------
# the Debian base


def _base_key() -> str:
    recipe = {"recipe": _RECIPE, "suite": DEBIAN_SUITE, "mirror": DEBIAN_MIRROR, "packages": DEBIAN_PACKAGES}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]


def _base_stamp() -> Path:
    return images_dir() / "base" / f"base-{_base_key()}.json"


def _unmount_under(path: Path) -> None:
    """Lazily unmount whatever a killed debootstrap left mounted under ``path`` (proc, sys)."""
    prefix = str(path.resolve()) + "/"
    with contextlib.suppress(OSError):
        points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
        for point in sorted((p for p in points if p.startswith(prefix)), reverse=True):
            subprocess.run(["umount", "--lazy", point], check=False, capture_output=True)


def _remove(path: Path) -> None:
    """Delete a file or a directory tree (after unmounting what is mounted inside)."""
    if path.is_dir() and not path.is_symlink():
        _unmount_under(path)
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _bootstrap(rootfs_tar: Path, log: Path) -> None:
    """debootstrap a minbase rootfs and pack it as ``rootfs_tar`` (numeric owners kept)."""
    work = rootfs_tar.with_suffix(".tmp")
    _remove(work)
    _progress(f"bootstrapping a Debian {DEBIAN_SUITE} base from {DEBIAN_MIRROR} (debootstrap, ~1 min; log: {log})")
    with _support.progress_while("bootstrapping the Debian base", log):
        _run(["debootstrap", "--variant=minbase", f"--include={','.join(DEBIAN_PACKAGES)}", DEBIAN_SUITE,
              str(work), DEBIAN_MIRROR], log, "debootstrap", timeout=1800)
    _unmount_under(work)
    for pattern in ("var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "var/lib/apt/lists/*_*",
                    "var/log/*.log", "var/log/apt/*"):
        for path in work.glob(pattern):
            path.unlink()
    (work / "etc/apt/sources.list").write_text(_SOURCES)  # as on Debian's images: updates, security
    for name in ("etc/resolv.conf", "etc/hostname"):  # the machine's, copied by debootstrap
        (work / name).write_text("")
    tmp = rootfs_tar.with_suffix(".tar.tmp")
    _run(["tar", "--numeric-owner", "-C", str(work), "-cf", str(tmp), "."], log, "packing the rootfs")
    tmp.replace(rootfs_tar)
    shutil.rmtree(work)


def debian_base() -> BaseImage:
    """The Debian 12 base (``localhost/conveyor-base:<recipe hash>``) in the cache's buildah
    storage: reused when present, else committed from the cached rootfs tarball, else
    bootstrapped first (``debootstrap``, about a minute).

    Raises:
        ComponentUnavailable: not root, buildah/debootstrap missing, or a step failed.
    """
    _require("buildah")
    with _locked():
        return _debian_base_locked()


def _debian_base_locked() -> BaseImage:
    key = _base_key()
    ref = f"{BASE_REPOSITORY}:{key}"
    stamp = _base_stamp()
    inspected = _quiet(_buildah("inspect", "--type", "image", "--format", "{{.FromImageID}}", ref))
    image_id = inspected.stdout.strip() if inspected.returncode == 0 else ""
    if image_id:
        if not stamp.is_file():
            stamp.write_text(json.dumps({"ref": ref, "image_id": image_id}))
        return BaseImage(ref, image_id, built=False)
    base_dir = stamp.parent
    base_dir.mkdir(exist_ok=True)
    rootfs_tar = base_dir / f"rootfs-{key}.tar"
    log = _log("base")
    started = time.monotonic()
    if not rootfs_tar.is_file():
        _require("buildah", "debootstrap")
        _bootstrap(rootfs_tar, log)
        _progress(f"Debian rootfs bootstrapped in {time.monotonic() - started:.0f}s")
    container = _run(_buildah("from", "--quiet", "scratch"), log, "buildah from scratch", capture=True).strip()
    try:
        _run(_buildah("add", container, str(rootfs_tar), "/"), log, "buildah add (the rootfs)")
        _run(_buildah("config", "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                      "--env", "LANG=C.UTF-8", "--cmd", "/bin/bash", "--label",
                      f"dev.conveyor.base={DEBIAN_SUITE} minbase {' '.join(DEBIAN_PACKAGES)}", container),
             log, "buildah config")
        image_id = _run(_buildah("commit", "--quiet", "--rm", container, ref), log, "buildah commit",
                        capture=True).strip()
    except ComponentUnavailable:
        _quiet(_buildah("rm", container))
        raise
    stamp.write_text(json.dumps({"ref": ref, "image_id": image_id}))
    for old in base_dir.iterdir():  # earlier recipes' rootfs and stamps
        if key not in old.name:
            _remove(old)
    listed = _quiet(_buildah("images", "--format", "{{.Name}}:{{.Tag}}", BASE_REPOSITORY))
    stale = [r for r in listed.stdout.split() if r.startswith(BASE_REPOSITORY + ":") and r != ref]
    if stale:
        _quiet(_buildah("rmi", *stale))
    _progress(f"base image {ref} ready in {time.monotonic() - started:.0f}s")
    return BaseImage(ref, image_id, built=True)


# --------------------------------------------------------------------------------------------
# the project's images


def _cached(targets: Sequence[str], tag: str) -> dict[str, BuiltImage] | None:
    found = {}
    for target in targets:
        archive = images_dir() / f"{target}-{tag}.tar"
        with contextlib.suppress(OSError):
            found[target] = BuiltImage(f"{REPOSITORIES[target]}:{tag}", archive, archive.stat().st_size, built=False)
    return found if len(found) == len(targets) else None


def build_images(targets: Sequence[str] = ("runtime", "operator"), *, context: Path | None = None) -> dict[str, BuiltImage]:
    """Build the Dockerfile's ``targets`` on :func:`debian_base` and write each as a
    docker-archive; the cached archives when nothing that goes into them changed.

    Args:
        targets: Dockerfile targets, keys of :data:`REPOSITORIES`.
        context: the checkout to build (default: the one this module is in).

    Returns:
        ``{target: BuiltImage}`` in the order of ``targets``.

    Raises:
        ComponentUnavailable: not root, buildah/debootstrap missing, not a checkout, or a build
            step failed (with its log's tail).
    """
    unknown = [t for t in targets if t not in REPOSITORIES]
    if unknown:
        raise ValueError(f"unknown targets {unknown}; the Dockerfile's are {sorted(REPOSITORIES)}")
    context = (context or _REPO).resolve()
    if not (context / "Dockerfile").is_file():
        raise ComponentUnavailable(COMPONENT, f"no Dockerfile in {context} (the images are built from a checkout)")
    with contextlib.suppress(OSError, ValueError, KeyError):
        base_id = json.loads(_base_stamp().read_text())["image_id"]
        cached = _cached(targets, source_hash(context, base_id)[:12])
        if cached:
            return cached
    _require("buildah")
    # each step is bounded by its own timeout; a cold build (debootstrap, pip) must not count
    # against the pytest-timeout of the first test that needs the images
    with _support.outside_test_timeout(), _locked():
        base = _debian_base_locked()
        tag = source_hash(context, base.image_id)[:12]
        result: dict[str, BuiltImage] = {}
        for target in targets:
            cached = _cached([target], tag)
            result[target] = cached[target] if cached else _build(context, target, tag, base)
        _prune(tag)
        return result


def _build(context: Path, target: str, tag: str, base: BaseImage) -> BuiltImage:
    ref = f"{REPOSITORIES[target]}:{tag}"
    log = _log(target)
    _progress(f"building {ref} (Dockerfile target {target} on {base.ref}; minutes when cold; log: {log})")
    started = time.monotonic()
    ca, cert = Path(os.environ.get("PIP_CERT") or HOST_CA_BUNDLE), []
    if ca.is_file():
        (images_dir() / "ca").mkdir(exist_ok=True)
        shutil.copyfile(ca, images_dir() / "ca" / "ca-certificates.crt")
        cert = ["--volume", f"{images_dir() / 'ca'}:/mnt:ro", "--build-arg", "PIP_CERT=/mnt/ca-certificates.crt"]
    with _support.progress_while(f"building the {target} image", log):
        _run(_buildah("bud", "--isolation", "chroot", "--pull-never", "--layers", "--force-rm",
                      "--build-arg", f"BASE_IMAGE={base.ref}", *cert, "--target", target, "--tag", ref,
                      "--file", str(context / "Dockerfile"), str(context)), log, f"buildah bud --target {target}")
    built = time.monotonic()
    archive = images_dir() / f"{target}-{tag}.tar"
    partial = archive.with_suffix(".tar.tmp")
    partial.unlink(missing_ok=True)
    _run(_buildah("push", "--quiet", ref, f"docker-archive:{partial}:{ref}"), log, f"buildah push {ref}")
    partial.replace(archive)
    size = archive.stat().st_size
    _progress(f"built {ref} in {built - started:.0f}s, archived in {time.monotonic() - built:.0f}s "
              f"({size / 1e6:.0f} MB: {archive})")
    return BuiltImage(ref, archive, size, built=True)


def _prune(tag: str) -> None:
    """Keep the current archive per target and, in buildah's storage, the base, the images
    tagged ``tag`` and the layers they are built from; remove the rest. Never raises."""
    root = images_dir()
    for target in REPOSITORIES:
        for old in root.glob(f"{target}-*.tar*"):
            if old.name != f"{target}-{tag}.tar":
                old.unlink(missing_ok=True)
    for other in [*root.glob("storage-*"), *root.glob("runroot-*")]:  # another driver's storage
        if not other.name.endswith(f"-{storage_driver()}"):
            _remove(other)
    _quiet(_buildah("rm", "--all"))  # working containers a killed build left (we hold the lock)
    listed = _quiet(_buildah("images", "--format", "{{.Name}}:{{.Tag}}"))
    stale = [ref for ref in listed.stdout.split()
             if ref.rpartition(":")[0] in REPOSITORIES.values() and ref.rpartition(":")[2] != tag]
    if stale:
        _quiet(_buildah("rmi", *stale))
    for _ in range(20):  # each round removes the untagged images nothing is built on any more
        if not _quiet(_buildah("rmi", "--prune")).stdout.strip():
            break
    tmp = root / "tmp"
    for leftover in tmp.iterdir() if tmp.is_dir() else ():
        if leftover.name != "buildah-cache":  # the pip cache mount stays
            _remove(leftover)
