"""The ``conveyor`` command.

``conveyor run CONNECTOR.yaml`` runs a connector's driver (local Spark by default);
``conveyor cleanup CONNECTOR.yaml`` runs the connector-deleted stop path of a connector
that is not running; the other commands talk to a running driver's control API
(``--url`` or ``CONVEYOR_CONTROL_URL``) with its admin token (``--token-file``,
``CONVEYOR_CONTROL_TOKEN_FILE``, or the file a local ``conveyor run`` wrote for that port; see
:mod:`conveyor.runtime.control_auth`).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import urllib.error
import urllib.request
from http import HTTPStatus
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from conveyor.api.redaction import RedactSecrets, redact_data, redact_text
from conveyor.manifest import ConnectorManifest, ManifestError
from conveyor.runtime.control_auth import (
    TOKEN_DIR_ENV,
    ControlAuthError,
    ControlTokens,
    authorization_header,
    find_token,
    open_direct,
    remove_local_token,
    write_local_token,
)

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
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactSecrets())


def _stop_for(connector: ConnectorManifest, signals: list[int]) -> dict[str, bool]:
    """``Driver.stop``'s arguments: a plain stop, unless SIGTERM came because the pod's namespace
    is being deleted (:mod:`conveyor.runtime.namespace_deletion`): then ``spec.deletionPolicy``'s."""
    from conveyor.manifest import OffsetsPolicy
    from conveyor.runtime.namespace_deletion import namespace_terminating

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
    from conveyor.runtime.driver import Driver, DriverError
    from conveyor.runtime.spark_session import refuse_enforced_changes

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
    from conveyor.runtime.progress import ProgressReporter

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
    from conveyor.runtime.failed_start import FailedStart

    result = FailedStart(manifest, error).stop(**stop)
    log.info("connector %s: connector-deleted stop path after the failed start: removed %s%s", manifest.name,
             ", ".join(result["removed"]) or "nothing",
             f"; failed: {result['connector_trace']}" if result["connector_trace"] else "")


def _serve_failed_start(manifest: ConnectorManifest, error: str, host: str, port: int, tokens: ControlTokens,
                        stop_requested: threading.Event) -> None:
    """Serve the failure (``GET /status``) and the connector-deleted stop path until SIGTERM,
    instead of exiting into a crash loop (see :mod:`conveyor.runtime.failed_start`)."""
    from conveyor.runtime.control_server import ControlServer
    from conveyor.runtime.failed_start import FailedStart

    server = ControlServer(FailedStart(manifest, error), host, port, tokens)  # type: ignore[arg-type]
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


def _request(url: str, path: str, method: str, token_file: Path | None) -> urllib.request.Request:
    try:
        token = find_token(url, token_file)
    except ControlAuthError as exc:
        _error(exc)
        raise typer.Exit(2) from None
    return urllib.request.Request(f"{url.rstrip('/')}{path}", method=method,
                                  data=b"" if method == "POST" else None, headers=authorization_header(token))


def _refused(exc: urllib.error.HTTPError, method: str, url: str) -> typer.Exit:
    if exc.code == HTTPStatus.UNAUTHORIZED:
        _error(f"{method} {url}: no valid control token; give --token-file or CONVEYOR_CONTROL_TOKEN_FILE (the "
               "admin-token of the connector's <name>-control Secret, or the file `conveyor run` logged)")
    else:
        _error(f"{method} {url}: HTTP {exc.code}: {exc.read().decode(errors='replace')}")
    return typer.Exit(1)


def _call(url: str, path: str = "/status", method: str = "GET", timeout: float = 120.0,
          token_file: Path | None = None) -> Any:
    req = _request(url, path, method, token_file)
    try:
        with open_direct(req, timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raise _refused(exc, method, req.full_url) from None
    except OSError as exc:
        typer.echo(f"error: cannot reach the driver at {url}: {exc}", err=True)
        raise typer.Exit(1) from None


UrlOption = Annotated[str, typer.Option(envvar="CONVEYOR_CONTROL_URL", help="Driver control API.")]
TokenFileOption = Annotated[
    Optional[Path],
    typer.Option(help="File with the control API token (default: $CONVEYOR_CONTROL_TOKEN_FILE, else the one a "
                 "local `conveyor run` wrote for the URL's port)."),
]


def _post(url: str, path: str, timeout: float = 120.0, token_file: Path | None = None) -> Any:
    return _call(url, path, "POST", timeout=timeout, token_file=token_file)


def _print(result: Any) -> None:
    typer.echo(json.dumps(redact_data(result), indent=2))


def _error(message: Any) -> None:
    typer.echo(f"error: {redact_text(str(message))}", err=True)


@app.command()
def status(url: UrlOption = DEFAULT_CONTROL_URL, token_file: TokenFileOption = None) -> None:
    """Print a running connector's status (Kafka Connect's status document)."""
    _print(_call(url, "/status", token_file=token_file))


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
    deleted = "true" if connector_deleted else "false"
    offsets = "true" if delete_offsets else "false"
    result = _post(url, f"/stop?connector_deleted={deleted}&delete_offsets={offsets}", timeout=600,
                   token_file=token_file)
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
    from urllib.parse import quote

    from conveyor.runtime.protocol import current_pod

    target = f"task={task}" if task is not None else f"pod={quote(pod or current_pod())}"
    request = _request(url, f"/drain?{target}&timeout_s={timeout}", "POST", token_file)
    try:
        with open_direct(request, timeout + 30) as resp:
            result = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        if exc.code != HTTPStatus.CONFLICT:
            raise _refused(exc, "POST", request.full_url) from None
        # The driver is stopping (its pod is going, or the connector was stopped or deleted):
        # its stop path makes every task's closing commit, this pod's included.
        typer.echo("the driver is stopping: every task gets its closing commit from the stop path")
        raise typer.Exit(0) from None
    except OSError as exc:
        typer.echo(f"error: cannot reach the driver at {url}: {exc}", err=True)
        raise typer.Exit(1) from None
    _print(result)
    raise typer.Exit(0 if result.get("complete") else 1)


@app.command()
def pause(url: UrlOption = DEFAULT_CONTROL_URL, token_file: TokenFileOption = None) -> None:
    """Pause every task: no more put/poll; offsets are still committed."""
    _print(_post(url, "/pause", token_file=token_file))


@app.command()
def resume(url: UrlOption = DEFAULT_CONTROL_URL, token_file: TokenFileOption = None) -> None:
    """Resume a paused or stopped connector."""
    _print(_post(url, "/state?target=running", timeout=600, token_file=token_file))


@app.command(name="stop-tasks")
def stop_tasks(url: UrlOption = DEFAULT_CONTROL_URL, token_file: TokenFileOption = None) -> None:
    """Kafka Connect's STOPPED state: tasks make closing commits and stop; the driver keeps serving."""
    _print(_post(url, "/state?target=stopped", timeout=600, token_file=token_file))


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
        _print(_post(url, f"/tasks/{task}/restart", token_file=token_file))
        return
    if all_ and connector:
        typer.echo("error: --all and --connector exclude each other", err=True)
        raise typer.Exit(2)
    if not (all_ or connector or only_failed):
        typer.echo("error: give a task id, --all, --connector or --only-failed", err=True)
        raise typer.Exit(2)
    include_tasks = "false" if connector else "true"
    failed = "true" if only_failed else "false"
    result = _post(url, f"/restart?include_tasks={include_tasks}&only_failed={failed}", timeout=600,
                   token_file=token_file)
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

    from conveyor.runtime.cleanup import CleanupError, cleanup_connector
    from conveyor.runtime.preflight import PreflightError

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
