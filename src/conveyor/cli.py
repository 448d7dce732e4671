"""The ``conveyor`` command.

``conveyor run CONNECTOR.yaml`` runs a connector's driver (local Spark by default);
``conveyor status`` and ``conveyor stop`` talk to a running driver's control API.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from conveyor.manifest import ConnectorManifest, ManifestError

app = typer.Typer(
    add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, help="Run Kafka-Connect-style connectors on Spark."
)
log = logging.getLogger("conveyor")

DEFAULT_CONTROL_URL = "http://127.0.0.1:8083"


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s [%(name)s] %(message)s", stream=sys.stderr
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)


@app.command()
def run(
    manifest: Annotated[Path, typer.Argument(help="Connector manifest (YAML, kind: Connector).")],
    master: Annotated[
        Optional[str], typer.Option(help="Spark master URL; default local[N] with a slot per task.")
    ] = None,
    control_host: Annotated[str, typer.Option(help="Address the control API listens on.")] = "127.0.0.1",
    control_port: Annotated[int, typer.Option(help="Port of the control API (0 picks a free one).")] = 8083,
    advertised_host: Annotated[
        Optional[str], typer.Option(help="Host name executors use to reach the control API.")
    ] = None,
    progress: Annotated[
        Optional[bool], typer.Option("--progress/--no-progress", help="Live status line (default: when a terminal).")
    ] = None,
    log_level: Annotated[str, typer.Option(help="Python log level.")] = "INFO",
) -> None:
    """Run a connector until SIGTERM or Ctrl-C, then stop it gracefully (closing commits)."""
    from conveyor.runtime.driver import Driver, DriverError

    _setup_logging(log_level)
    try:
        connector = ConnectorManifest.load(manifest)
    except ManifestError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    driver = Driver(
        connector, master=master, control_host=control_host, control_port=control_port,
        advertised_host=advertised_host,
    )
    stop_requested = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("received %s: stopping %s gracefully", signal.Signals(signum).name, connector.name)
        stop_requested.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        driver.start()
    except DriverError as exc:
        typer.echo(f"error: {exc}", err=True)
        driver.close()
        raise typer.Exit(1) from None
    show_progress = sys.stderr.isatty() if progress is None else progress
    from conveyor.runtime.progress import ProgressReporter

    reporter = ProgressReporter(driver, live=show_progress)
    try:
        with reporter:
            while not stop_requested.is_set() and not driver.stopped.is_set():
                stop_requested.wait(0.5)
                reporter.update()
        result = driver.stop()
    finally:
        driver.close()
    failed = [t for t in result["tasks"] if t["state"] == "FAILED"]
    typer.echo(json.dumps(result, indent=2))
    raise typer.Exit(1 if failed else 0)


def _call(url: str, method: str = "GET", timeout: float = 120.0) -> Any:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        typer.echo(f"error: {method} {url}: HTTP {exc.code}: {exc.read().decode(errors='replace')}", err=True)
        raise typer.Exit(1) from None
    except OSError as exc:
        typer.echo(f"error: cannot reach the driver at {url}: {exc}", err=True)
        raise typer.Exit(1) from None


@app.command()
def status(
    url: Annotated[str, typer.Option(envvar="CONVEYOR_CONTROL_URL", help="Driver control API.")] = DEFAULT_CONTROL_URL,
) -> None:
    """Print a running connector's status (Kafka Connect's status document)."""
    typer.echo(json.dumps(_call(f"{url.rstrip('/')}/status"), indent=2))


@app.command()
def stop(
    url: Annotated[str, typer.Option(envvar="CONVEYOR_CONTROL_URL", help="Driver control API.")] = DEFAULT_CONTROL_URL,
    connector_deleted: Annotated[
        bool, typer.Option("--connector-deleted", help="The connector is being deleted: clean up external resources.")
    ] = False,
) -> None:
    """Stop a running connector: closing commits, then stop(connector_deleted)."""
    flag = "true" if connector_deleted else "false"
    typer.echo(json.dumps(_call(f"{url.rstrip('/')}/stop?connector_deleted={flag}", "POST"), indent=2))


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
