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
