"""The import contracts of pyproject.toml hold (import-linter): the connector API stays free of Spark,
Kafka and Kubernetes, and no package has an import circle among its modules."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_hold():
    lint = shutil.which("lint-imports")
    assert lint, "import-linter is not installed: pip install -e '.[dev]'"
    result = subprocess.run([lint, "--config", str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: " in result.stdout and " broken" in result.stdout


def test_api_imports_without_heavy_packages():
    code = (
        "import sys; import conveyor.api; "
        "bad = [m for m in ('pyspark', 'confluent_kafka', 'kubernetes', 'kopf') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_package_says_what_lives_in_it():
    import ast

    bare = [str(init.relative_to(ROOT)) for base in ("src/conveyor", "operator/conveyor_operator")
            for init in sorted((ROOT / base).rglob("__init__.py"))
            if not ast.get_docstring(ast.parse(init.read_text()))]
    assert not bare, f"packages without a docstring: {bare}"


def test_the_readme_layout_names_only_paths_that_exist():
    import re

    text = (ROOT / "README.md").read_text()
    layout = text[text.index("## Layout"):]
    layout = layout[:layout.find("\n## ", 5)] if "\n## " in layout[5:] else layout
    bases = [ROOT / b for b in ("", "src/conveyor", "src/conveyor/runtime", "src/conveyor/runtime/driver",
                                "src/conveyor/runtime/task", "operator/conveyor_operator", "tests")]
    paths = {p for p in re.findall(r"`([^`\s<>*]+)`", layout) if "/" in p or p.endswith(".py")}
    missing = sorted(p for p in paths if not any((base / p.rstrip("/")).exists() for base in bases))
    assert paths and not missing, f"README layout names paths that do not exist: {missing}"
