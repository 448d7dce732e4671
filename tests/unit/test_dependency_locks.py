"""requirements/*.lock against pyproject.toml and the Dockerfile: the images install locked, hashed
packages and nothing else.

scripts/lock-deps.sh writes the locks with ``uv pip compile --generate-hashes`` (it needs PyPI; these
tests are offline and resolve nothing). They check that

* every lock entry is ``name==version`` with sha256 hashes (pip's hash-checking mode, which
  ``--require-hashes`` turns on), once per name, with no index, link or URL that could bring in
  something else;
* each image's lock was compiled from pyproject.toml with exactly the extras that image installs,
  for the Python of the Dockerfile's default base image, and by the command scripts/lock-deps.sh runs;
* every requirement of ``conveyor[<those extras>]`` (the package's references to itself followed,
  environment markers evaluated for the image's platform) is pinned, at a version its specifier
  allows: a dependency added to pyproject.toml or a bound moved past the pin fails here until the
  locks are regenerated;
* build.lock pins pip, setuptools and wheel, at versions [build-system].requires allows, and a
  package in both build.lock and an image's lock has one version;
* the Dockerfile installs each lock with ``--require-hashes --no-deps --no-build-isolation``
  (sdists are built by the locked setuptools, not by build dependencies fetched unhashed) and
  conveyor's own wheel with ``--no-index``, so pip can fetch nothing else.

What they cannot check offline, the image build does: the extras of dependencies
(``psycopg[binary]``) and the requirements of the locked packages themselves are resolved there by
``pip install --no-index``, which fails on anything missing from the lock, then ``pip check``.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from _pyproject import declared_requirements
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest depends on tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ROOT / "requirements"
SCRIPT = ROOT / "scripts" / "lock-deps.sh"
DOCKERFILE = ROOT / "Dockerfile"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
#: Dockerfile target -> the lock of its dependencies (build.lock is every target's venv tools).
TARGET_LOCKS = {"runtime": "runtime.lock", "operator": "operator.lock"}
BUILD_LOCK = "build.lock"
BUILD_TOOLS = {"pip", "setuptools", "wheel"}
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")
LOCK_IN_IMAGE = re.compile(r"^/tmp/requirements/(?P<name>[\w.-]+\.lock)$")
#: uv pip compile options that take a value (the header's command is parsed with these).
VALUE_OPTIONS = {"--python-version", "--python-platform", "--extra", "--output-file", "-o", "--index-url"}
CONVEYOR_WHEEL = re.compile(r"^\$1\[(?P<extras>[\w,.-]+)\]$")  # after `set -- /tmp/wheels/conveyor-*.whl`


# --------------------------------------------------------------------------------------------
# a lock file


@dataclass(frozen=True)
class Pin:
    name: str  # canonical (PEP 503)
    version: Version
    hashes: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class Lock:
    path: Path
    header: list[str]  # the comment lines before the first entry
    pins: dict[str, Pin]

    def command(self) -> list[str]:
        """The ``uv pip compile ...`` command uv wrote into the header, as words."""
        (line,) = [h for h in self.header if h.lstrip("# ").startswith("uv pip compile ")]
        return shlex.split(line.lstrip("# "))

    def option(self, name: str) -> list[str]:
        words = self.command()
        return [words[i + 1] for i, word in enumerate(words[:-1]) if word == name]

    def inputs(self) -> list[str]:
        """The command's positional arguments: the files it compiled."""
        words, found = self.command()[3:], []
        while words:
            word = words.pop(0)
            if word in VALUE_OPTIONS:
                words.pop(0)
            elif not word.startswith("-"):
                found.append(word)
        return found


def logical_lines(text: str, *, comments: bool = True) -> list[tuple[int, str]]:
    """(first line number, text) of each line, continuation lines joined; comment lines dropped
    unless ``comments`` (a Dockerfile drops them inside a continued instruction too)."""
    lines, buffer, start = [], "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not comments and raw.strip().startswith("#"):
            continue
        if not buffer:
            start = number
        if raw.rstrip().endswith("\\"):
            buffer += raw.rstrip()[:-1] + " "
            continue
        lines.append((start, buffer + raw))
        buffer = ""
    assert not buffer, "ends inside a continued line"
    return lines


def read_lock(path: Path) -> Lock:
    """A requirements file as uv pip compile --generate-hashes writes it; asserts its shape."""
    header: list[str] = []
    pins: dict[str, Pin] = {}
    for number, line in logical_lines(path.read_text()):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            if not pins and stripped:
                header.append(stripped)
            continue
        assert not stripped.startswith("-"), f"{path.name}:{number}: an option line ({stripped.split()[0]})"
        spec, *options = re.split(r"\s+(?=--)", stripped)
        req = Requirement(spec)
        assert req.url is None and not req.extras and req.marker is None, f"{path.name}:{number}: {spec}"
        specifiers = list(req.specifier)
        pinned = len(specifiers) == 1 and specifiers[0].operator == "==" and "*" not in specifiers[0].version
        assert pinned, f"{path.name}:{number}: {spec} not pinned"
        specifier = specifiers[0]
        hashes = tuple(options)
        assert hashes, f"{path.name}:{number}: {spec} has no hash"
        for option in hashes:
            assert HASH.fullmatch(option), f"{path.name}:{number}: {option} is not a sha256 --hash"
        name = canonicalize_name(req.name)
        assert name not in pins, f"{path.name}:{number}: {name} pinned twice"
        pins[name] = Pin(name, Version(specifier.version), hashes, number)
    return Lock(path, header, pins)


def lock(name: str) -> Lock:
    path = LOCKS / name
    assert path.is_file(), f"{path.relative_to(ROOT)} is missing: run scripts/lock-deps.sh"
    return read_lock(path)


# --------------------------------------------------------------------------------------------
# what pyproject.toml asks of a lock


def platform_environment(python_version: str) -> dict[str, str]:
    """PEP 508 marker variables of CPython ``python_version`` on linux x86_64 (the images)."""
    return {
        **default_environment(),
        "python_version": python_version,
        "python_full_version": f"{python_version}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "os_name": "posix",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
    }


def unmet(requirements: list[Requirement], pins: dict[str, Pin]) -> list[str]:
    """Each requirement the pins leave unmet, as ``requirement: why``."""
    problems = []
    for req in requirements:
        pin = pins.get(canonicalize_name(req.name))
        if pin is None:
            problems.append(f"{req}: not in the lock")
        elif not req.specifier.contains(pin.version, prereleases=True):
            problems.append(f"{req}: the lock pins {pin.version}")
    return problems


# --------------------------------------------------------------------------------------------
# the Dockerfile (enough of it: stages, their base, and their instructions)


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int


def dockerfile_stages() -> tuple[dict[str, str], dict[str, tuple[str, list[Instruction]]]]:
    """The global ARGs (name -> default) and ``{stage: (base, instructions)}``; comments dropped."""
    global_args: dict[str, str] = {}
    stages: dict[str, tuple[str, list[Instruction]]] = {}
    current: list[Instruction] | None = None
    for number, line in logical_lines(DOCKERFILE.read_text(), comments=False):
        keyword, _, args = line.strip().partition(" ")
        if not keyword:
            continue
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            base, _, name = re.sub(r"\s+AS\s+", " AS ", args, flags=re.IGNORECASE).partition(" AS ")
            current = []
            stages[name.strip() or str(len(stages))] = (base.strip(), current)
        elif current is None:
            name, _, default = args.partition("=")
            global_args[name] = default
        else:
            current.append(Instruction(keyword, args, number))
    return global_args, stages


GLOBAL_ARGS, STAGES = dockerfile_stages()


def chain(stage: str) -> list[Instruction]:
    """The instructions of ``stage`` and of the stages it is built FROM, base first."""
    instructions: list[Instruction] = []
    while stage in STAGES:
        base, own = STAGES[stage]
        instructions[:0] = own
        stage = base
    return instructions


def commands(instructions: list[Instruction]) -> list[tuple[Instruction, list[str]]]:
    """The simple commands of the RUNs (split on && and ;), as words."""
    found = []
    for run in (i for i in instructions if i.keyword == "RUN"):
        for part in re.split(r"&&|;", run.args):
            try:
                words = shlex.split(part)
            except ValueError:  # an unbalanced quote: a printf'd script, not a pip command
                continue
            words = [w for w in words if not w.startswith("--mount=")]
            if words:
                found.append((run, words))
    return found


def pip_commands(stage: str, verb: str) -> list[tuple[Instruction, list[str]]]:
    return [(run, words) for run, words in commands(chain(stage)) if words[:2] == ["pip", verb]]


def installed_locks(stage: str) -> list[str]:
    """The lock files (names) a stage's chain installs with ``pip install -r``."""
    names = []
    for _, words in pip_commands(stage, "install"):
        for i, word in enumerate(words[:-1]):
            if word in ("-r", "--requirement"):
                match = LOCK_IN_IMAGE.match(words[i + 1])
                assert match, f"pip install -r {words[i + 1]}: not a lock under /tmp/requirements"
                names.append(match["name"])
    return names


def copied_locks(stage: str) -> set[str]:
    copies = [shlex.split(i.args) for i in chain(stage) if i.keyword == "COPY"]
    return {Path(w).name for words in copies if not any(w.startswith("--from=") for w in words)
            for w in words[:-1] if w.startswith("requirements/")}


def wheel_extras(stage: str) -> set[str]:
    extras: set[str] = set()
    for _, words in pip_commands(stage, "install"):
        for word in words[2:]:
            match = CONVEYOR_WHEEL.match(word)
            if match:
                extras.update(match["extras"].split(","))
    return extras


def base_image_python() -> str:
    """The minor version of the Python in the Dockerfile's default base image (``3.11``)."""
    match = re.match(r"python:(?P<version>3\.\d+)-", GLOBAL_ARGS["BASE_IMAGE"])
    assert match, f"the default BASE_IMAGE {GLOBAL_ARGS['BASE_IMAGE']} is not an official python image"
    return match["version"]


# --------------------------------------------------------------------------------------------
# the locks themselves


ALL_LOCKS = [BUILD_LOCK, *TARGET_LOCKS.values()]


@pytest.mark.parametrize("name", ALL_LOCKS)
def test_every_entry_is_pinned_with_hashes(name):
    pins = lock(name).pins  # read_lock asserts the shape of each entry
    assert pins, f"{name} pins nothing"


def test_no_lock_is_left_over_or_missing():
    assert sorted(p.name for p in LOCKS.glob("*.lock")) == sorted(ALL_LOCKS)


@pytest.mark.parametrize("name", ALL_LOCKS)
def test_lock_was_written_by_the_script_for_the_images_python(name):
    locked = lock(name)
    assert locked.header[0].startswith("# Generated by scripts/lock-deps.sh"), locked.header[0]
    words = locked.command()
    assert "--generate-hashes" in words
    assert locked.option("--output-file") == [f"requirements/{name}"]
    (python,) = locked.option("--python-version")
    assert python == base_image_python(), f"{name} is for Python {python}, the base image has {base_image_python()}"
    assert SpecifierSet(PROJECT["requires-python"]).contains(python)
    (platform,) = locked.option("--python-platform")
    assert platform.startswith("x86_64-manylinux_"), platform  # the base image's digest is its amd64 manifest
    # the script runs this very command (its options, its input, its extras)
    script = SCRIPT.read_text()
    assert os.access(SCRIPT, os.X_OK), "scripts/lock-deps.sh is not executable"
    for option in ("--python-version", "--python-platform"):
        expected = f"{option} {locked.option(option)[0]}"
        assert expected in script, f"scripts/lock-deps.sh has no {expected}"
    calls = [line for _, line in logical_lines(script, comments=False) if line.startswith("compile ")]
    (call,) = [line for line in calls if line.startswith(f"compile requirements/{name} ")]
    script_args = [w for w in shlex.split(call)[2:] if w != "$@"]
    header_args = words[words.index(script_args[0]):words.index("--output-file")]
    assert script_args == header_args, f"scripts/lock-deps.sh runs `{call}`, the header of {name} says {header_args}"


# --------------------------------------------------------------------------------------------
# the locks against pyproject.toml


@pytest.mark.parametrize("target", TARGET_LOCKS)
def test_image_lock_covers_the_extras_the_image_installs(target):
    locked = lock(TARGET_LOCKS[target])
    assert locked.inputs() == ["pyproject.toml"], locked.inputs()
    assert set(locked.option("--extra")) == wheel_extras(target), (
        f"{locked.path.name} is for conveyor[{','.join(locked.option('--extra'))}], the {target} image installs "
        f"conveyor[{','.join(sorted(wheel_extras(target)))}]: change scripts/lock-deps.sh and run it")


@pytest.mark.parametrize("target", TARGET_LOCKS)
def test_image_lock_pins_every_declared_requirement_within_its_bounds(target):
    locked = lock(TARGET_LOCKS[target])
    requirements = declared_requirements(wheel_extras(target), platform_environment(base_image_python()))
    assert requirements
    problems = unmet(requirements, locked.pins)
    assert not problems, (f"{locked.path.name} disagrees with pyproject.toml (run scripts/lock-deps.sh):\n  "
                          + "\n  ".join(problems))


def test_image_locks_pin_no_build_tools_and_not_conveyor():
    """The venv's pip, setuptools and wheel come from build.lock only (one version in the image)."""
    for name in TARGET_LOCKS.values():
        assert not (set(lock(name).pins) & (BUILD_TOOLS | {canonicalize_name(PROJECT["name"])})), name


@pytest.mark.parametrize("target", TARGET_LOCKS)
def test_image_lock_agrees_with_build_lock_on_shared_packages(target):
    """A package in both locks (wheel's ``packaging``) gets one version: the image lock, installed
    second with --no-deps, would otherwise replace what the build tools were checked with."""
    build, image = lock(BUILD_LOCK).pins, lock(TARGET_LOCKS[target]).pins
    differ = {name: (str(build[name].version), str(image[name].version)) for name in set(build) & set(image)
              if build[name].version != image[name].version}
    assert not differ, f"build.lock and {TARGET_LOCKS[target]} pin different versions: {differ}"


def test_build_lock_pins_the_build_tools_build_system_allows():
    pins = lock(BUILD_LOCK).pins
    assert BUILD_TOOLS <= set(pins), f"build.lock lacks {sorted(BUILD_TOOLS - set(pins))}"
    problems = unmet([Requirement(r) for r in PYPROJECT["build-system"]["requires"]], pins)
    assert not problems, problems


# --------------------------------------------------------------------------------------------
# the Dockerfile installs the locks and nothing else


def test_dockerfile_base_image_is_pinned_by_digest():
    assert re.fullmatch(r"python:3\.\d+-slim-bookworm@sha256:[0-9a-f]{64}", GLOBAL_ARGS["BASE_IMAGE"]), GLOBAL_ARGS


@pytest.mark.parametrize("stage", ["builder", *TARGET_LOCKS])
def test_every_pip_install_is_a_hashed_lock_or_conveyor_from_no_index(stage):
    installs = pip_commands(stage, "install")
    assert installs, f"{stage} installs nothing with pip"
    for run, words in installs:
        if "-r" in words or "--requirement" in words:
            for flag in ("--require-hashes", "--no-deps", "--no-build-isolation"):
                assert flag in words, f"line {run.line}: pip install -r without {flag}"
        else:
            (package,) = [w for w in words[2:] if not w.startswith("-")]
            assert CONVEYOR_WHEEL.match(package), f"line {run.line}: pip install {package} (not from a lock)"
            assert "--no-index" in words, f"line {run.line}: conveyor's wheel installed from an index"
    upgrades = [w for _, w in commands(chain(stage)) if "--upgrade-deps" in w]
    assert not upgrades, "venv --upgrade-deps fetches pip and setuptools from no lock"
    for name in installed_locks(stage):
        assert name in copied_locks(stage), f"{stage} installs {name} without COPYing requirements/{name}"


@pytest.mark.parametrize("target", TARGET_LOCKS)
def test_each_image_installs_its_lock_after_the_build_tools(target):
    assert installed_locks(target) == [BUILD_LOCK, TARGET_LOCKS[target]], installed_locks(target)


def test_builder_builds_the_wheel_with_the_locked_build_tools():
    assert installed_locks("builder") == [BUILD_LOCK]
    (wheel,) = pip_commands("builder", "wheel")
    assert "--no-build-isolation" in wheel[1] and "--no-deps" in wheel[1], wheel[1]
