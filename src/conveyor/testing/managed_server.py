"""What the harness's server processes share (the Kafka broker, PostgreSQL, RabbitMQ, the Kafka
Connect worker, S3Proxy, Apicurio Registry): the process, its temp dir and log, the port picked
or fixed, a start that retries on a port taken meanwhile, a failure that carries the log, and
tearing them down."""

from __future__ import annotations

import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conveyor.testing import _support
from conveyor.testing.errors import ComponentUnavailable, Endpoint


class ManagedServer(Endpoint):
    """Base of a server the harness runs as a process in a temp dir of its own.

    Subclasses set :attr:`log_name`, :attr:`server_name` (or override :meth:`_where`), call
    :meth:`_init_server` from ``__init__``, launch into ``_proc`` / ``_record`` / ``workdir``
    (through :meth:`_start_with_port_retries`), and tear down with :meth:`_kill` then
    :meth:`_discard`.

    Attributes:
        port: the server's port (0 until started when it is picked).
        workdir: the temp dir (log, data), ``None`` when there is none.
        startup_timeout: seconds ``start`` waits for the first answer.
        ready_seconds: seconds from launching the process to its first answer (last start).
    """

    log_name = "server.log"
    #: What messages call the server (``"S3Proxy"``); the version follows.
    server_name = "server"
    version = ""
    #: What exited, in "the <process_name> exited with code N during startup".
    process_name = "server process"
    #: How :meth:`_kill` stops the process: this signal, then SIGKILL after ``stop_grace_s``.
    stop_signal: int = signal.SIGTERM
    stop_grace_s = 10.0
    #: Lines of the log a failure shows.
    log_tail_lines = 40

    def _init_server(self, startup_timeout: float, port: int | None = 0) -> None:
        """``port``: fixed, 0 for one picked at each start (forgotten at :meth:`_discard`), or
        ``None`` when the subclass keeps its ports itself."""
        if port is not None:
            self.port = port
        self.startup_timeout = startup_timeout
        self.workdir: Path | None = None
        self.ready_seconds: float | None = None
        self._fixed_port = bool(port)
        self._picked_port = port == 0
        self._proc: subprocess.Popen | None = None
        self._record: Path | None = None
        self._client: Any = None

    @property
    def log_path(self) -> Path | None:
        """The process's stdout and stderr, or its log (in :attr:`workdir`)."""
        return self.workdir / self.log_name if self.workdir else None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self):  # noqa: ANN204 - returns self, started (Python 3.10 has no typing.Self)
        return self.start()  # type: ignore[attr-defined]

    def _start_with_port_retries(self, start_once: Callable[[], None], port_taken: str) -> None:
        """``start_once`` (which picks free ports), again up to 3 times when the log says a port
        was taken in between (``port_taken``); :meth:`stop` between attempts. Clears processes
        a killed earlier run left behind first."""
        _support.reap_stale()
        _support.start_with_port_retries(start_once, self.stop, port_taken, self.component)

    def _kill(self) -> None:
        """Close the cached client (a JVM would wait on its idle keep-alive connection), then
        stop the process: :attr:`stop_signal`, SIGKILL after :attr:`stop_grace_s`."""
        client, self._client = self._client, None
        if client is not None:
            client.close()
        proc, self._proc = self._proc, None
        if proc is not None:
            _support.stop_process(proc, first_signal=self.stop_signal, grace=self.stop_grace_s)

    def _discard(self) -> None:
        """Forget the stopped process: its record for crash clean-up, its temp dir, a picked port."""
        _support.unregister_child(self._record)
        self._record = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        if self._picked_port:
            self.port = 0
        _support.untrack(self)

    def _check_alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise self._unavailable(f"the {self.process_name} exited with code {self._proc.returncode} during startup")

    def _where(self) -> str:
        """The server in a failure's message: name, version and address."""
        return f"{self.server_name} {self.version} at {_support.LOOPBACK}:{self.port or '<free port>'}"

    def _first_error(self, log_text: str) -> str:
        """The line of the log that says what went wrong (overridden for a server's own format)."""
        return _support.first_error_line(log_text)

    def _hints(self) -> list[str]:
        """Hints every failure of this server carries (overridden)."""
        return []

    def _unavailable(self, reason: str, hint: str = "") -> ComponentUnavailable:
        """``reason`` as this component's failure: the log's error line, its last lines, and
        the whole log kept in the harness's log directory."""
        log_tail = _support.tail(self.log_path, self.log_tail_lines) if self.log_path else ""
        first = self._first_error(_support.tail(self.log_path, 400)) if self.log_path else ""
        kept = _support.preserve_log(self.log_path, self.component)
        hints = [h for h in (hint, *self._hints(), f"full log: {kept}" if kept else "") if h]
        return ComponentUnavailable(
            self.component,
            f"{self._where()}: {reason}" + (f"; {first}" if first else ""),
            hint="; ".join(hints),
            log_tail=log_tail,
        )
