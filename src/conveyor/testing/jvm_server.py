"""What the harness's single-JVM servers (S3Proxy, Apicurio Registry) share: the process, its
temp dir and log, the port picked or fixed, and tearing them down."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from conveyor.testing import _support
from conveyor.testing.errors import ComponentUnavailable, Endpoint


class JvmServer(Endpoint):
    """Base of a server the harness runs as one JVM in a temp dir of its own.

    Subclasses set :attr:`log_name`, call :meth:`_init_server` from ``__init__``, launch into
    ``_proc`` / ``_record`` / ``workdir``, and tear down with :meth:`_kill` then
    :meth:`_discard`.

    Attributes:
        port: the HTTP port (0 until started when it is picked).
        workdir: the temp dir (log, data), ``None`` when there is none.
        startup_timeout: seconds ``start`` waits for the first answer.
        ready_seconds: seconds from launching the JVM to its first answer (last start).
    """

    log_name = "server.log"
    #: What messages call the server (``"S3Proxy"``); the version follows.
    server_name = "server"
    version = ""

    def _init_server(self, port: int, startup_timeout: float) -> None:
        self.port = port
        self.startup_timeout = startup_timeout
        self.workdir: Path | None = None
        self.ready_seconds: float | None = None
        self._fixed_port = bool(port)
        self._proc: subprocess.Popen | None = None
        self._record: Path | None = None
        self._client: Any = None

    @property
    def log_path(self) -> Path | None:
        """The JVM's stdout and stderr (in :attr:`workdir`)."""
        return self.workdir / self.log_name if self.workdir else None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _kill(self) -> None:
        """Close the cached client (the JVM would wait on its idle keep-alive connection), then
        stop the JVM: SIGTERM, SIGKILL after 10 s."""
        client, self._client = self._client, None
        if client is not None:
            client.close()
        proc, self._proc = self._proc, None
        if proc is not None:
            _support.stop_process(proc, grace=10.0)

    def _discard(self) -> None:
        """Forget the stopped JVM: its record for crash clean-up, its temp dir, a picked port."""
        _support.unregister_child(self._record)
        self._record = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        if not self._fixed_port:
            self.port = 0
        _support.untrack(self)

    def _first_error(self, log_text: str) -> str:
        """The line of the log that says what went wrong (overridden for a server's own format)."""
        return _support.first_error_line(log_text)

    def _hints(self) -> list[str]:
        """Hints every failure of this server carries (overridden)."""
        return []

    def _unavailable(self, reason: str, hint: str = "") -> ComponentUnavailable:
        """``reason`` as this component's failure: the log's error line, its last 40 lines, and
        the whole log kept in the harness's log directory."""
        log_tail = _support.tail(self.log_path, 40) if self.log_path else ""
        first = self._first_error(_support.tail(self.log_path, 400)) if self.log_path else ""
        kept = _support.preserve_log(self.log_path, self.component)
        hints = [h for h in (hint, *self._hints(), f"full log: {kept}" if kept else "") if h]
        return ComponentUnavailable(
            self.component,
            f"{self.server_name} {self.version} at {_support.LOOPBACK}:{self.port or '<free port>'}: {reason}"
            + (f"; {first}" if first else ""),
            hint="; ".join(hints),
            log_tail=log_tail,
        )
