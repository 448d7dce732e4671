"""The ``conveyor`` command.

``conveyor run CONNECTOR.yaml`` runs a connector's driver (local Spark by default);
``conveyor cleanup CONNECTOR.yaml`` runs the connector-deleted stop path of a connector
that is not running; the other commands talk to a running driver's control API
(``--url`` or ``CONVEYOR_CONTROL_URL``) with its admin token (``--token-file``,
``CONVEYOR_CONTROL_TOKEN_FILE``, or the file a local ``conveyor run`` wrote for that port; see
:mod:`conveyor.control.auth`).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from conveyor.api.redaction import RedactSecrets, redact_data, redact_text
from conveyor.control.auth import (
    TOKEN_DIR_ENV,
    ControlAuthError,
    ControlTokens,
    find_token,
    remove_local_token,
    write_local_token,
)
from conveyor.control.client import DriverClient, DriverRefused, DriverUnreachable
from conveyor.control.protocol import current_pod
from conveyor.manifest import ConnectorManifest, ManifestError, OffsetsPolicy
from conveyor.runtime.deletion.namespace import namespace_terminating

app = typer.Typer(
    add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, help="Run Kafka-Connect-style connectors on Spark."
)
log = logging.getLogger("conveyor")

DEFAULT_CONTROL_URL = "http://127.0.0.1:8083"
STOP_WAIT_S = 570.0
"""How long ``conveyor stop`` lets the stop path take (the call waits 30 s more)."""
STATE_WAIT_S = 600.0
"""How long ``conveyor resume``, ``stop-tasks`` and ``restart`` wait for the tasks to get there."""


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s [%(name)s] %(message)s", stream=sys.stderr
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactSecrets())


def _stop_for(connector: ConnectorManifest, signals: list[int]) -> dict[str, bool]:
    """``Driver.stop``'s arguments: a plain stop, unless SIGTERM came because the pod's namespace
    is being deleted (:mod:`conveyor.runtime.deletion.namespace`): then ``spec.deletionPolicy``'s."""

    if signal.SIGTERM not in signals or not namespace_terminating():
        return {}
    policy = connector.spec.deletion_policy
    log.info("namespace of %s is being deleted: running the connector-deleted stop path (cleanup=%s, offsets=%s)",
             connector.name, policy.cleanup, policy.offsets.value)
    return {"connector_deleted": policy.cleanup, "delete_offsets": policy.offsets is OffsetsPolicy.DELETE}


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
    conf: Annotated[
        Optional[list[str]],
        typer.Option("--conf", metavar="KEY=VALUE",
                     help="A Spark property, as spark-submit's --conf (repeatable); wins over spec.spark.sparkConf. "
                     "spark.master here is used when --master is not given."),
    ] = None,
    stay_after_stop: Annotated[
        bool, typer.Option("--stay-after-stop/--exit-after-stop",
                           help="After a stop through the control API, or when the connector cannot start, keep "
                           "serving /status (and, after a failed start, the connector-deleted stop path) until "
                           "SIGTERM instead of exiting: in a Deployment an exit restarts the driver.")
    ] = False,
) -> None:
    """Run a connector until SIGTERM or Ctrl-C, then stop it gracefully (closing commits)."""
    from conveyor.runtime.driver.driver import Driver, DriverError  # Kafka, Spark: for `run` only
    from conveyor.runtime.driver.spark_session import refuse_enforced_changes

    _setup_logging(log_level)
    try:
        spark_conf = parse_conf(conf or [])
        refuse_enforced_changes(spark_conf, "--conf")  # Spark RPC stays authenticated and encrypted
    except ValueError as exc:
        _error(exc)
        raise typer.Exit(2) from None
    try:
        connector, written_spec = ConnectorManifest.load_as_written(manifest)
    except ManifestError as exc:
        _error(exc)
        raise typer.Exit(2) from None
    try:
        tokens, token_file = _serving_tokens(control_port)
    except ControlAuthError as exc:
        _error(exc)
        raise typer.Exit(2) from None
    driver = Driver(
        connector, master=master, control_host=control_host, control_port=control_port,
        advertised_host=advertised_host, spark_conf=spark_conf, control_tokens=tokens, written_spec=written_spec,
    )
    stop_requested = threading.Event()
    signals: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("received %s: stopping %s gracefully", signal.Signals(signum).name, connector.name)
        signals.append(signum)
        driver.cancel_start()
        stop_requested.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        try:
            driver.start()
        except DriverError as exc:
            _error(exc)
            driver.close()
            if stay_after_stop and not stop_requested.is_set():
                _serve_failed_start(connector, str(exc), control_host, control_port, tokens, stop_requested)
            _stop_failed_start(connector, str(exc), signals)
            raise typer.Exit(1) from None
        if token_file is None and not os.environ.get(TOKEN_DIR_ENV):
            token_file = _write_token_file(driver.server.port, tokens)
        _run_until_stopped(driver, connector, progress, stay_after_stop, stop_requested, signals)
    finally:
        if token_file is not None:
            remove_local_token(token_file)


def _serving_tokens(control_port: int) -> tuple[ControlTokens, Path | None]:
    """The control API's tokens: the mounted ones (``$CONVEYOR_CONTROL_TOKEN_DIR``, a pod), else
    fresh ones whose admin token goes to a private file for the port (written here when the port
    is known, else once the server listens), for the ``conveyor`` commands on this machine."""
    if os.environ.get(TOKEN_DIR_ENV):
        return ControlTokens.load_dir(os.environ[TOKEN_DIR_ENV]), None
    tokens = ControlTokens.generate()
    return tokens, _write_token_file(control_port, tokens) if control_port else None


def _write_token_file(port: int, tokens: ControlTokens) -> Path:
    path = write_local_token(port, tokens.admin)
    log.info("control API token for the conveyor commands: %s (readable by this user only)", path)
    return path


def _run_until_stopped(driver: Any, connector: ConnectorManifest, progress: bool | None, stay_after_stop: bool,
                       stop_requested: threading.Event, signals: list[int]) -> None:
    """Serve until SIGTERM/Ctrl-C (or a stop through the control API), stop, print, exit."""
    show_progress = sys.stderr.isatty() if progress is None else progress
    from conveyor.runtime.driver.progress import ProgressReporter  # for `run` only

    reporter = ProgressReporter(driver, live=show_progress)
    try:
        with reporter:
            while not stop_requested.is_set() and not driver.stopped.is_set():
                stop_requested.wait(0.5)
                reporter.update()
        if driver.stopped.is_set() and stay_after_stop and not stop_requested.is_set():
            log.info("connector %s stopped through the control API; serving its status until SIGTERM", connector.name)
            stop_requested.wait()
        result = driver.stop(**_stop_for(connector, signals))
    finally:
        driver.close()
    failed = [t for t in result["tasks"] if t["state"] == "FAILED"]
    _print(result)
    raise typer.Exit(1 if failed else 0)


def _stop_failed_start(manifest: ConnectorManifest, error: str, signals: list[int]) -> None:
    """A start that failed, with a SIGTERM (during it, or while its failure was served) because
    the namespace is being deleted: the connector-deleted stop path all the same, as
    ``conveyor cleanup`` runs it -- the connector may have provisioned before the start failed
    (it starts before Spark), and no cleanup Job can be created in that namespace."""
    stop = _stop_for(manifest, signals)
    if not stop:
        return
    from conveyor.runtime.driver.failed_start import FailedStart  # a failed `run` only

    result = FailedStart(manifest, error).stop(**stop)
    log.info("connector %s: connector-deleted stop path after the failed start: removed %s%s", manifest.name,
             ", ".join(result["removed"]) or "nothing",
             f"; failed: {result['connector_trace']}" if result["connector_trace"] else "")


def _serve_failed_start(manifest: ConnectorManifest, error: str, host: str, port: int, tokens: ControlTokens,
                        stop_requested: threading.Event) -> None:
    """Serve the failure (``GET /status``) and the connector-deleted stop path until SIGTERM,
    instead of exiting into a crash loop (see :mod:`conveyor.runtime.driver.failed_start`)."""
    from conveyor.runtime.driver.failed_start import FailedStart  # a failed `run` only
    from conveyor.runtime.rest.server import ControlServer  # Starlette, uvicorn: when serving

    server = ControlServer(FailedStart(manifest, error), host, port, tokens)
    server.start()
    log.error("connector %s failed to start; serving its status on port %d until SIGTERM", manifest.name,
              server.port)
    try:
        stop_requested.wait()
    finally:
        server.stop()


def parse_conf(items: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` (``--conf`` values) as a dict, later ones winning; the value may
    contain ``=``.

    Raises:
        ValueError: an item has no ``=`` or an empty key.
    """
    conf: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf {item!r}: expected KEY=VALUE")
        conf[key.strip()] = value
    return conf


def _client(url: str, token_file: Path | None, timeout_s: float = 120.0) -> DriverClient:
    """The driver's client with the admin token the ``conveyor`` commands send (exit 2 when a
    token file cannot be read)."""
    try:
        token = find_token(url, token_file)
    except ControlAuthError as exc:
        _error(exc)
        raise typer.Exit(2) from None
    return DriverClient(url, timeout_s=timeout_s, token=token)


@contextmanager
def _answered(url: str, allow_conflict: bool = False) -> Iterator[None]:
    """Exit 1 with a message when the driver refuses the call or cannot be reached."""
    try:
        yield
    except DriverRefused as exc:
        if exc.status == HTTPStatus.UNAUTHORIZED:
            _error(f"{url}: no valid control token; give --token-file or CONVEYOR_CONTROL_TOKEN_FILE (the "
                   "admin-token of the connector's <name>-control Secret, or the file `conveyor run` logged)")
        else:
            _error(f"{url}: HTTP {exc.status}: {exc.body or exc.message}")
        raise typer.Exit(1) from None
    except DriverUnreachable as exc:
        typer.echo(f"error: cannot reach the driver at {url}: {exc}", err=True)
        raise typer.Exit(1) from None


UrlOption = Annotated[str, typer.Option(envvar="CONVEYOR_CONTROL_URL", help="Driver control API.")]
TokenFileOption = Annotated[
    Optional[Path],
    typer.Option(help="File with the control API token (default: $CONVEYOR_CONTROL_TOKEN_FILE, else the one a "
                 "local `conveyor run` wrote for the URL's port)."),
]


def _print(result: Any) -> None:
    typer.echo(json.dumps(redact_data(result), indent=2))


def _error(message: Any) -> None:
    typer.echo(f"error: {redact_text(str(message))}", err=True)


@app.command()
def status(url: UrlOption = DEFAULT_CONTROL_URL, token_file: TokenFileOption = None) -> None:
    """Print a running connector's status (Kafka Connect's status document)."""
    with _answered(url):
        _print(_client(url, token_file).status())


@app.command()
def stop(
    url: UrlOption = DEFAULT_CONTROL_URL,
    connector_deleted: Annotated[
        bool, typer.Option("--connector-deleted", help="The connector is being deleted: clean up external resources.")
    ] = False,
    delete_offsets: Annotated[
        bool, typer.Option("--delete-offsets",
                           help="Then delete the offsets: the sink consumer group connect-<name>, or tombstones for "
                           "the source offsets and task-count record.")
    ] = False,
    token_file: TokenFileOption = None,
) -> None:
    """Stop a running connector: closing commits, then stop(connector_deleted); the driver exits.

    Prints the result; exits 1 when deleting the offsets failed."""
    with _answered(url):
        result = _client(url, token_file).stop(connector_deleted, delete_offsets, timeout_s=STOP_WAIT_S)
    _print(result)
    if result.get("offsets_error"):
        typer.echo(f"error: {result['offsets_error']}", err=True)
        raise typer.Exit(1)


@app.command()
def drain(
    url: UrlOption = DEFAULT_CONTROL_URL,
    pod: Annotated[Optional[str], typer.Option(help="Drain the tasks on this pod (default: this pod).")] = None,
    task: Annotated[Optional[int], typer.Option(help="Drain this task instead.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the closing commits.")] = 60.0,
    token_file: TokenFileOption = None,
) -> None:
    """Closing commit of the tasks hosted in this pod (for a preStop hook).

    Blocks until they are done or the timeout passes, prints what was committed, exits 1 if
    incomplete. A driver that is stopping answers 409: its stop path commits every task, so that is a
    success (exit 0); an unreachable driver is not (exit 1)."""

    client = _client(url, token_file)
    with _answered(url):
        try:
            result = client.drain(pod=None if task is not None else pod or current_pod(), timeout_s=timeout, task=task)
        except DriverRefused as exc:
            if exc.status != HTTPStatus.CONFLICT:
                raise
            # The driver is stopping (its pod is going, or the connector was stopped or deleted):
            # its stop path makes every task's closing commit, this pod's included.
            typer.echo("the driver is stopping: every task gets its closing commit from the stop path")
            raise typer.Exit(0) from None
    _print(result)
    raise typer.Exit(0 if result.get("complete") else 1)


@app.command()
def pause(url: UrlOption = DEFAULT_CONTROL_URL, token_file: TokenFileOption = None) -> None:
    """Pause every task: no more put/poll; offsets are still committed."""
    with _answered(url):
        _print(_client(url, token_file).pause())


@app.command()
def resume(url: UrlOption = DEFAULT_CONTROL_URL, token_file: TokenFileOption = None) -> None:
    """Resume a paused or stopped connector."""
    with _answered(url):
        _print(_client(url, token_file).set_state("running", wait_s=STATE_WAIT_S))


@app.command(name="stop-tasks")
def stop_tasks(url: UrlOption = DEFAULT_CONTROL_URL, token_file: TokenFileOption = None) -> None:
    """Kafka Connect's STOPPED state: tasks make closing commits and stop; the driver keeps serving."""
    with _answered(url):
        _print(_client(url, token_file).set_state("stopped", wait_s=STATE_WAIT_S))


@app.command()
def restart(
    task: Annotated[Optional[int], typer.Argument(help="Task id: restart only this task.")] = None,
    url: UrlOption = DEFAULT_CONTROL_URL,
    all_: Annotated[
        bool, typer.Option("--all", help="Restart the connector and all its tasks (include_tasks=true).")
    ] = False,
    connector: Annotated[
        bool, typer.Option("--connector", help="Restart the connector instance only (include_tasks=false).")
    ] = False,
    only_failed: Annotated[
        bool, typer.Option("--only-failed", help="Only what is FAILED (the connector and/or tasks); implies --all "
                           "unless --connector is given.")
    ] = False,
    token_file: TokenFileOption = None,
) -> None:
    """Restart one task (closing commit, then a new run), or the connector.

    `conveyor restart 2` restarts task 2; the connector as Kafka Connect's POST /connectors/<name>/restart: `conveyor restart --all`,
    `--connector`, `--only-failed`. Exits 1 when the connector failed to start again."""
    if task is not None:
        if all_ or connector or only_failed:
            typer.echo("error: give a task id or --all/--connector/--only-failed, not both", err=True)
            raise typer.Exit(2)
        with _answered(url):
            _print(_client(url, token_file).restart_task(task))
        return
    if all_ and connector:
        typer.echo("error: --all and --connector exclude each other", err=True)
        raise typer.Exit(2)
    if not (all_ or connector or only_failed):
        typer.echo("error: give a task id, --all, --connector or --only-failed", err=True)
        raise typer.Exit(2)
    with _answered(url):
        result = _client(url, token_file).restart(include_tasks=not connector, only_failed=only_failed,
                                                  wait_s=STATE_WAIT_S)
    _print(result)
    if result.get("connector", {}).get("state") == "FAILED":
        raise typer.Exit(1)


@app.command()
def cleanup(
    manifest: Annotated[Path, typer.Argument(help="Connector manifest (YAML, kind: Connector).")],
    timeout: Annotated[float, typer.Option(help="Seconds to keep retrying transient failures.")] = 300.0,
    delete_offsets: Annotated[
        bool, typer.Option("--delete-offsets",
                           help="Also delete the offsets: the sink consumer group connect-<name>, or tombstones for "
                           "the source offsets and task-count record (spec.deletionPolicy.offsets: delete).")
    ] = False,
    offsets_only: Annotated[
        bool, typer.Option("--offsets-only",
                           help="Only delete the offsets; do not start the connector (implies --delete-offsets).")
    ] = False,
    log_level: Annotated[str, typer.Option(help="Python log level.")] = "INFO",
) -> None:
    """Clean up after a deleted connector that is not running.

    Starts it and its tasks only to stop them with connector_deleted=True, then optionally
    deletes its offsets. Moves no
    data; idempotent; prints what was done; exits 1 with the reason when cleanup or the
    offsets deletion cannot finish, 2 for an invalid manifest."""
    from dataclasses import asdict

    from conveyor.runtime.config.validation import PreflightError
    from conveyor.runtime.deletion.cleanup import CleanupError, cleanup_connector  # connectors: `cleanup` only

    _setup_logging(log_level)
    try:
        result = cleanup_connector(ConnectorManifest.load(manifest), timeout_s=timeout,
                                   delete_offsets=delete_offsets or offsets_only, connector_cleanup=not offsets_only)
    except ManifestError as exc:
        _error(exc)
        raise typer.Exit(2) from None
    except (CleanupError, PreflightError) as exc:
        _error(exc)
        raise typer.Exit(1) from None
    _print(asdict(result))
    if not result.ok:
        typer.echo(f"error: cleanup of {result.name}: deleting offsets failed: {result.offsets_error}", err=True)
        raise typer.Exit(1)


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
