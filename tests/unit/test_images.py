"""conveyor.testing.images without building anything: what the build context is, what the
content hash covers, the cached path (no buildah call at all) and the failure when the tools
are missing."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from conveyor.testing import ComponentUnavailable, images

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def context(tmp_path: Path) -> Path:
    """A small checkout: the repository's own Dockerfile and .dockerignore, sources, and what a
    development checkout leaves around them."""
    ctx = tmp_path / "repo"
    files = {
        "pyproject.toml": "[project]\nname = 'x'\n",
        "README.md": "# x\n",
        "src/pkg/__init__.py": "",
        "src/pkg/mod.py": "X = 1\n",
        "src/pkg/__pycache__/mod.cpython-311.pyc": "bytecode",
        "src/pkg.egg-info/PKG-INFO": "Name: x\n",
        "operator/op/__init__.py": "",
        "tests/test_x.py": "def test(): pass\n",
        ".git/HEAD": "ref: refs/heads/main\n",
        "charts/x/Chart.yaml": "name: x\n",
    }
    for rel, text in files.items():
        (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
        (ctx / rel).write_text(text)
    for name in ("Dockerfile", ".dockerignore"):
        shutil.copyfile(ROOT / name, ctx / name)
    return ctx


def test_context_is_what_dockerignore_lets_through(context):
    assert images.context_files(context) == [
        "README.md", "operator/op/__init__.py", "pyproject.toml", "src/pkg/__init__.py", "src/pkg/mod.py",
    ]


def test_the_repositorys_context_is_its_sources():
    files = images.context_files(ROOT)
    assert "src/conveyor/testing/images.py" in files and "operator/conveyor_operator/__init__.py" in files
    assert {"pyproject.toml", "README.md"} <= set(files)
    assert {"requirements/runtime.lock", "requirements/operator.lock", "requirements/build.lock"} <= set(files)
    assert all(f.startswith(("src/", "operator/")) or f in ("pyproject.toml", "README.md")
               or (f.startswith("requirements/") and f.endswith(".lock")) for f in files)
    assert not [f for f in files if "__pycache__" in f or ".egg-info" in f or f.endswith(".pyc")]


def test_dockerignore_patterns_follow_docker(tmp_path):
    (tmp_path / ".dockerignore").write_text("# comment\n*.log\n!keep.log\ndocs/**/draft*\n/build\n[ab].txt\n")
    for rel in ("a.log", "keep.log", "docs/x/y/draft1.md", "docs/final.md", "build/out", "a.txt", "c.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    files = images.context_files(tmp_path)
    assert "a.log" not in files and "keep.log" in files
    assert "docs/x/y/draft1.md" not in files and "docs/final.md" in files
    assert "build/out" not in files and "a.txt" not in files and "c.txt" in files


def test_hash_follows_sources_not_bytecode(context):
    before = images.source_hash(context, "sha256:base")
    assert images.source_hash(context, "sha256:base") == before

    (context / "src/pkg/__pycache__/mod.cpython-311.pyc").write_text("other bytecode")
    (context / "src/pkg/__pycache__/new.cpython-311.pyc").write_text("more")
    (context / "tests/test_x.py").write_text("changed")
    (context / "charts/x/Chart.yaml").write_text("changed")
    assert images.source_hash(context, "sha256:base") == before, "files outside the build context"

    assert images.source_hash(context, "sha256:other-base") != before, "the base image"
    (context / "src/pkg/mod.py").write_text("X = 2\n")
    changed = images.source_hash(context, "sha256:base")
    assert changed != before, "a source file"
    (context / "src/pkg/mod.py").chmod(0o755)
    assert images.source_hash(context, "sha256:base") != changed, "the executable bit"

    for added in ("src/pkg/new.py", "operator/op/new.py"):
        current = images.source_hash(context, "sha256:base")
        (context / added).write_text("")
        assert images.source_hash(context, "sha256:base") != current, added
    for rel in ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md"):
        current = images.source_hash(context, "sha256:base")
        with open(context / rel, "a") as f:
            f.write("\n# edited\n")
        assert images.source_hash(context, "sha256:base") != current, rel


def _no_tools(monkeypatch):
    monkeypatch.setattr(images.shutil, "which", lambda name: None)
    monkeypatch.setattr(images.os, "geteuid", lambda: 0)

    def no_subprocess(*args, **kwargs):
        raise AssertionError(f"ran {args[0] if args else kwargs}")

    monkeypatch.setattr(images.subprocess, "run", no_subprocess)


def test_unchanged_sources_return_the_cached_archives_without_buildah(context, tmp_path, monkeypatch):
    monkeypatch.setenv("CONVEYOR_CACHE_DIR", str(tmp_path / "cache"))
    _no_tools(monkeypatch)
    base_stamp = images._base_stamp()
    base_stamp.parent.mkdir(parents=True)
    base_stamp.write_text(json.dumps({"ref": "localhost/conveyor-base:x", "image_id": "sha256:b"}))
    tag = images.source_hash(context, "sha256:b")[:12]
    for target in ("runtime", "operator"):
        (images.images_dir() / f"{target}-{tag}.tar").write_bytes(b"x" * (10 if target == "runtime" else 5))

    started = time.monotonic()
    built = images.build_images(context=context)
    assert time.monotonic() - started < 1.0
    assert list(built) == ["runtime", "operator"]
    runtime, operator = built["runtime"], built["operator"]
    assert runtime.ref == f"localhost/conveyor:{tag}" and operator.ref == f"localhost/conveyor-operator:{tag}"
    assert (runtime.repository, runtime.tag) == ("localhost/conveyor", tag)
    assert runtime.archive == images.images_dir() / f"runtime-{tag}.tar" and runtime.size_bytes == 10
    assert not runtime.built and not operator.built
    assert images.build_images(["operator"], context=context) == {"operator": operator}

    # a changed source means a build, and here that fails clearly: buildah is missing
    (context / "src/pkg/mod.py").write_text("X = 3\n")
    with pytest.raises(ComponentUnavailable) as e:
        images.build_images(context=context)
    assert e.value.component == "images" and "buildah" in e.value.reason
    assert "apt-get install buildah debootstrap" in e.value.hint


def test_missing_tools_and_non_root_are_named(context, tmp_path, monkeypatch):
    monkeypatch.setenv("CONVEYOR_CACHE_DIR", str(tmp_path / "cache"))
    _no_tools(monkeypatch)
    with pytest.raises(ComponentUnavailable, match=r"images unavailable: buildah not installed"):
        images.debian_base()
    monkeypatch.setattr(images.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(images.os, "geteuid", lambda: 1000)
    with pytest.raises(ComponentUnavailable, match="needs root"):
        images.build_images(context=context)
    with pytest.raises(ValueError, match="unknown targets"):
        images.build_images(["nope"], context=context)


def test_not_a_checkout(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVEYOR_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ComponentUnavailable, match="no Dockerfile"):
        images.build_images(context=tmp_path)
